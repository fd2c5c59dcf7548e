// One step of the AFT prior with the causal running max of the keys.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "seqmix/ops/aft.h"

namespace seqmix::ops {

AftState aft_initial_state(int64_t batch, int64_t channels, const at::TensorOptions& options) {
  check_state_args("aft_initial_state", {{"batch", batch}, {"channels", channels}}, options);
  return {at::zeros({batch, channels}, options), at::zeros({batch, channels}, options),
          at::full({batch, channels}, -1e30, options)};
}

PriorRead native::aft_step(const at::Tensor& k_t, const at::Tensor& v_t, AftState& state, const at::Tensor& mask_t) {
  const char* op = "aft_step";
  check_rank(k_t, op, "k_t", 2, "B,C");
  check_rank(v_t, op, "v_t", 2, "B,C");
  TORCH_CHECK(k_t.sizes() == v_t.sizes() && k_t.sizes() == state.key_max.sizes(), op,
              ": k_t, v_t and the state must share [B,C] (got ", k_t.sizes(), ", ", v_t.sizes(), ", ",
              state.key_max.sizes(), ")");
  check_state_dtype(op, k_t, {state.numerator, state.normaliser, state.key_max});
  if (mask_t.defined())
    TORCH_CHECK(mask_t.scalar_type() == at::kBool && mask_t.dim() == 1 && mask_t.size(0) == k_t.size(0), op,
                ": mask_t must be bool [B] = [", k_t.size(0), "] (got ", mask_t.scalar_type(), " ", mask_t.sizes(), ")");
  // A padded position's key and value are zeroed first, so a NaN or inf there never reaches the state (0 x NaN).
  const at::Tensor key = mask_t.defined() ? k_t.masked_fill(mask_t.logical_not().view({-1, 1}), 0) : k_t;
  const at::Tensor value = mask_t.defined() ? v_t.masked_fill(mask_t.logical_not().view({-1, 1}), 0) : v_t;
  auto new_max = at::maximum(state.key_max, key);
  if (mask_t.defined()) new_max = at::where(mask_t.view({-1, 1}), new_max, state.key_max);
  // Rescale the running sums to the new max.
  auto rescale = (state.key_max - new_max).exp();
  auto exponent = key - new_max;
  if (mask_t.defined())  // exp(-inf) = 0 for padded positions, with a zero (not NaN) gradient
    exponent = at::where(mask_t.view({-1, 1}), exponent, at::full_like(exponent, -std::numeric_limits<double>::infinity()));
  auto w = exponent.exp();
  state.numerator = state.numerator * rescale + w * value;
  state.normaliser = state.normaliser * rescale + w;
  state.key_max = new_max;
  return {state.numerator.unsqueeze(1), state.normaliser.unsqueeze(1)};
}

}  // namespace seqmix::ops
