// One-token decode step of causal linear attention.
#include <ATen/ATen.h>

#include "../checks.h"
#include "seqmix/ops/linear_attention.h"

namespace seqmix::ops {

LinearAttentionState linear_attention_initial_state(int64_t batch, int64_t heads, int64_t dk, int64_t dv,
                                                    const at::TensorOptions& options) {
  return {at::zeros({batch, heads, dk, dv}, options), at::zeros({batch, heads, dk}, options)};
}

PriorRead linear_attention_step(const at::Tensor& q_t, const at::Tensor& k_t, const at::Tensor& v_t,
                                LinearAttentionState& state) {
  const char* op = "linear_attention_step";
  check_rank(q_t, op, "q_t", 3, "B,H,dk");
  check_rank(k_t, op, "k_t", 3, "B,H,dk");
  check_rank(v_t, op, "v_t", 3, "B,H,dv");
  check_rank(state.kv, op, "state.kv", 4, "B,H,dk,dv");
  state.kv = state.kv + k_t.unsqueeze(-1) * v_t.unsqueeze(-2);
  state.k_sum = state.k_sum + k_t;
  PriorRead read;
  read.numerator = (q_t.unsqueeze(-1) * state.kv).sum(-2).unsqueeze(1);
  read.normaliser = (q_t * state.k_sum).sum(-1).unsqueeze(1);
  return read;
}

}  // namespace seqmix::ops
