// One-token decode of causal ELA with a fixed-size state. Hadamard Exp keeps the state relative to the
// running max of each key channel, as the fused scan does.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "seqmix/ops/ela.h"

namespace seqmix::ops {

ElaState ela_initial_state(int64_t batch, int64_t heads, int64_t dk, int64_t dv, const ExactKernel& kernel,
                           const at::TensorOptions& options) {
  check_state_args("ela_initial_state", {{"batch", batch}, {"heads", heads}, {"dk", dk}, {"dv", dv}}, options);
  ElaState s;
  int64_t features = dk;
  if (!kernel.exponential)  // the feature width of a polynomial kernel, from one probe row
    features = kernel.query_features(at::zeros({1, dk}, options)).size(-1);
  s.kv = at::zeros({batch, heads, features, dv}, options);
  s.k_sum = at::zeros({batch, heads, features}, options);
  if (kernel.exponential) s.key_max = at::full({batch, heads, dk}, -1e30, options);
  return s;
}

at::Tensor native::ela_step(const at::Tensor& q_t, const at::Tensor& k_t, const at::Tensor& v_t,
                            const ExactKernel& kernel, ElaState& state, double eps) {
  const char* op = "ela_step";
  check_scan_step_args(op, q_t, k_t, v_t, state.kv, state.k_sum);
  check_eps(op, eps);
  if (kernel.exponential) {
    check_state_dtype(op, q_t, {state.key_max});
    TORCH_CHECK(state.key_max.defined(), op, ": kernel '", kernel.name,
                "' needs the state's key_max (was the state built by ela_initial_state for another kernel?)");
    TORCH_CHECK(state.key_max.sizes() == q_t.sizes() && state.kv.size(2) == q_t.size(2), op,
                ": kernel '", kernel.name, "' needs state.kv [B,H,dk,dv] and state.key_max [B,H,dk] with dk = ",
                q_t.size(2), " (got ", state.kv.sizes(), " and ", state.key_max.sizes(), ")");
    auto r = at::maximum(state.key_max, k_t);             // [B,H,dk]
    auto rescale = at::exp(state.key_max - r);
    auto w = at::exp(k_t - r);
    state.kv = state.kv * rescale.unsqueeze(-1) + w.unsqueeze(-1) * v_t.unsqueeze(-2);
    state.k_sum = state.k_sum * rescale + w;
    state.key_max = r;
    auto shifted = q_t + r;
    auto phi = at::exp(shifted - std::get<0>(shifted.max(-1, true)));
    auto numerator = (phi.unsqueeze(-1) * state.kv).sum(-2);
    return numerator / (phi * state.k_sum).sum(-1, true);
  }
  auto phi = kernel.query_features(q_t), psi = kernel.key_features(k_t);
  TORCH_CHECK(phi.size(-1) == state.kv.size(2) && psi.size(-1) == state.kv.size(2), op, ": kernel '", kernel.name,
              "' makes ", phi.size(-1), " features but the state holds ", state.kv.size(2),
              " (was the state built by ela_initial_state for another kernel?)");
  state.kv = state.kv + psi.unsqueeze(-1) * v_t.unsqueeze(-2);
  state.k_sum = state.k_sum + psi;
  auto normaliser = (phi * state.k_sum).sum(-1, true);
  check_row_sums(kernel, normaliser);
  return (phi.unsqueeze(-1) * state.kv).sum(-2) / normaliser.clamp_min(eps);
}

}  // namespace seqmix::ops
