// One decode step of the delta rule: the recurrence itself, on linear attention's state layout.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "seqmix/ops/delta.h"

namespace seqmix::ops {

PriorRead native::delta_rule_step(const at::Tensor& q_t, const at::Tensor& k_t, const at::Tensor& v_t,
                                  const at::Tensor& beta_t, LinearAttentionState& state) {
  const char* op = "delta_rule_step";
  check_scan_step_args(op, q_t, k_t, v_t, state.kv, state.k_sum);
  check_state_features_are_keys(op, q_t, state.kv);
  TORCH_CHECK(beta_t.defined(), op, ": beta_t must be given, [B,H]");
  check_rank(beta_t, op, "beta_t", 2, "B,H");
  check_same_float_dtype(op, {q_t, k_t, v_t, beta_t, state.kv, state.k_sum});  // the state too: no silent promotion
  TORCH_CHECK(beta_t.sizes() == q_t.sizes().slice(0, 2), op, ": beta_t must share [B,H] with q_t (got ",
              beta_t.sizes(), " and ", q_t.sizes(), ")");
  const auto b = beta_t.unsqueeze(-1);                                // [B,H,1]
  // S <- S + b k (v - k^T S)^T: what the state already returns for k_t is corrected towards v_t.
  const auto recalled = (k_t.unsqueeze(-1) * state.kv).sum(-2);      // k^T S [B,H,dv]
  state.kv = state.kv + (b * k_t).unsqueeze(-1) * (v_t - recalled).unsqueeze(-2);
  const auto recalled_one = (k_t * state.k_sum).sum(-1, /*keepdim=*/true);  // k . z [B,H,1]
  state.k_sum = state.k_sum + b * k_t * (1 - recalled_one);
  PriorRead read;
  read.numerator = (q_t.unsqueeze(-1) * state.kv).sum(-2).unsqueeze(1);
  read.normaliser = (q_t * state.k_sum).sum(-1).unsqueeze(1);
  return read;
}

}  // namespace seqmix::ops
