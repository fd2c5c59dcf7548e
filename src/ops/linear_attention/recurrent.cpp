// One-token decode step of causal linear attention.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "seqmix/ops/linear_attention.h"

namespace seqmix::ops {

LinearAttentionState linear_attention_initial_state(int64_t batch, int64_t heads, int64_t dk, int64_t dv,
                                                    const at::TensorOptions& options) {
  check_state_args("linear_attention_initial_state", {{"batch", batch}, {"heads", heads}, {"dk", dk}, {"dv", dv}},
                   options);
  return {at::zeros({batch, heads, dk, dv}, options), at::zeros({batch, heads, dk}, options)};
}

PriorRead native::linear_attention_step(const at::Tensor& q_t, const at::Tensor& k_t, const at::Tensor& v_t,
                                        LinearAttentionState& state) {
  const char* op = "linear_attention_step";
  check_scan_step_args(op, q_t, k_t, v_t, state.kv, state.k_sum);
  check_state_features_are_keys(op, q_t, state.kv);
  state.kv = state.kv + k_t.unsqueeze(-1) * v_t.unsqueeze(-2);
  state.k_sum = state.k_sum + k_t;
  PriorRead read;
  read.numerator = (q_t.unsqueeze(-1) * state.kv).sum(-2).unsqueeze(1);
  read.normaliser = (q_t * state.k_sum).sum(-1).unsqueeze(1);
  return read;
}

}  // namespace seqmix::ops
