// One-token decode of causal ELA with a fixed-size state. Hadamard Exp keeps the state relative to the
// running max of each key channel, as the fused scan does.
#include <ATen/ATen.h>

#include "../checks.h"
#include "seqmix/ops/ela.h"

namespace seqmix::ops {

ElaState ela_initial_state(int64_t batch, int64_t heads, int64_t dk, int64_t dv, const ExactKernel& kernel,
                           const at::TensorOptions& options) {
  ElaState s;
  int64_t features = dk;
  if (!kernel.exponential)  // the feature width of a polynomial kernel, from one probe row
    features = kernel.query_features(at::zeros({1, dk}, options)).size(-1);
  s.kv = at::zeros({batch, heads, features, dv}, options);
  s.k_sum = at::zeros({batch, heads, features}, options);
  if (kernel.exponential) s.key_max = at::full({batch, heads, dk}, -1e30, options);
  return s;
}

at::Tensor ela_step(const at::Tensor& q_t, const at::Tensor& k_t, const at::Tensor& v_t, const ExactKernel& kernel,
                    ElaState& state, double eps) {
  const char* op = "ela_step";
  check_rank(q_t, op, "q_t", 3, "B,H,dk");
  check_rank(k_t, op, "k_t", 3, "B,H,dk");
  check_rank(v_t, op, "v_t", 3, "B,H,dv");
  check_rank(state.kv, op, "state.kv", 4, "B,H,F,dv");
  if (kernel.exponential) {
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
  state.kv = state.kv + psi.unsqueeze(-1) * v_t.unsqueeze(-2);
  state.k_sum = state.k_sum + psi;
  auto normaliser = (phi * state.k_sum).sum(-1, true);
  check_row_sums(kernel, normaliser);
  return (phi.unsqueeze(-1) * state.kv).sum(-2) / normaliser.clamp_min(eps);
}

}  // namespace seqmix::ops
