// The AFT prior's decode state and one step of it, with the causal running max of the keys.
#include <ATen/ATen.h>

#include <limits>

#include "../common/checks.h"
#include "../common/torch_op.h"
#include "internal.h"
#include "seqmix/ops/aft.h"

namespace seqmix::ops {

// A fresh state: numerator and normaliser 0, key_max -1e30, each [B,C].
AftInitialStateCall::Result aft_initial_state_op(const AftInitialStateCall& call) {
  const at::TensorOptions options = options_of(call.dtype, call.device);
  check_state_args("aft_initial_state", {{"batch", call.batch}, {"channels", call.channels}}, options);
  return {at::zeros({call.batch, call.channels}, options), at::zeros({call.batch, call.channels}, options),
          at::full({call.batch, call.channels}, -1e30, options)};
}

// k_t, v_t [B,C], mask_t [B] or none -> the read (numerator and normaliser [B,1,C]) and the new state; the state given
// is not modified.
AftStepCall::Result aft_step_op(const AftStepCall& call) {
  const at::Tensor &k_t = call.k_t, &v_t = call.v_t, &key_max = call.key_max;
  const at::Tensor mask_t = or_undefined(call.mask_t);
  const char* op = "aft_step";
  check_rank(k_t, op, "k_t", 2, "B,C");
  check_rank(v_t, op, "v_t", 2, "B,C");
  TORCH_CHECK(k_t.sizes() == v_t.sizes() && k_t.sizes() == key_max.sizes(), op,
              ": k_t, v_t and the state must share [B,C] (got ", k_t.sizes(), ", ", v_t.sizes(), ", ",
              key_max.sizes(), ")");
  check_state_dtype(op, k_t, {call.state_numerator, call.state_normaliser, key_max});
  if (mask_t.defined())
    TORCH_CHECK(mask_t.scalar_type() == at::kBool && mask_t.dim() == 1 && mask_t.size(0) == k_t.size(0), op,
                ": mask_t must be bool [B] = [", k_t.size(0), "] (got ", mask_t.scalar_type(), " ", mask_t.sizes(), ")");
  // A padded position's key and value are zeroed first, so a NaN or inf there never reaches the state (0 x NaN).
  const at::Tensor key = mask_t.defined() ? k_t.masked_fill(mask_t.logical_not().view({-1, 1}), 0) : k_t;
  const at::Tensor value = mask_t.defined() ? v_t.masked_fill(mask_t.logical_not().view({-1, 1}), 0) : v_t;
  auto new_max = at::maximum(key_max, key);
  if (mask_t.defined()) new_max = at::where(mask_t.view({-1, 1}), new_max, key_max);
  // Rescale the running sums to the new max.
  auto rescale = (key_max - new_max).exp();
  auto exponent = key - new_max;
  if (mask_t.defined())  // exp(-inf) = 0 for padded positions, with a zero (not NaN) gradient
    exponent = at::where(mask_t.view({-1, 1}), exponent, at::full_like(exponent, -std::numeric_limits<double>::infinity()));
  auto w = exponent.exp();
  const at::Tensor numerator = call.state_numerator * rescale + w * value;
  const at::Tensor normaliser = call.state_normaliser * rescale + w;
  // The read is the new state; outputs must not alias each other, so it is a copy.
  return {numerator.unsqueeze(1).clone(), normaliser.unsqueeze(1).clone(), numerator, normaliser, new_max};
}

}  // namespace seqmix::ops
