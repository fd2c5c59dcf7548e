// One-token decode step of gated linear attention.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "seqmix/ops/gla.h"

namespace seqmix::ops {

PriorRead native::gla_step(const at::Tensor& q_t, const at::Tensor& k_t, const at::Tensor& v_t,
                   const at::Tensor& log_decay_t, LinearAttentionState& state) {
  const char* op = "gla_step";
  check_scan_step_args(op, q_t, k_t, v_t, state.kv, state.k_sum);
  check_state_features_are_keys(op, q_t, state.kv);
  TORCH_CHECK(log_decay_t.dim() == 2 || log_decay_t.dim() == 3, op,
              ": log_decay_t must be [B,H] (a decay per head) or [B,H,dk] (per key feature) (got ",
              log_decay_t.sizes(), ")");
  const bool per_key = log_decay_t.dim() == 3;
  TORCH_CHECK(log_decay_t.sizes() == (per_key ? q_t.sizes() : q_t.sizes().slice(0, 2)), op, ": log_decay_t must be ",
              per_key ? "[B,H,dk], q_t's shape" : "[B,H], q_t's first two sizes", " (got ", log_decay_t.sizes(),
              " and ", q_t.sizes(), ")");
  // The decay of each row of the state: [B,H,1] per head, [B,H,dk] per key.
  auto decay = per_key ? log_decay_t.exp() : log_decay_t.exp().unsqueeze(-1);
  state.kv = decay.unsqueeze(-1) * state.kv + k_t.unsqueeze(-1) * v_t.unsqueeze(-2);
  state.k_sum = decay * state.k_sum + k_t;
  PriorRead read;
  read.numerator = (q_t.unsqueeze(-1) * state.kv).sum(-2).unsqueeze(1);
  read.normaliser = (q_t * state.k_sum).sum(-1).unsqueeze(1);
  return read;
}

}  // namespace seqmix::ops
