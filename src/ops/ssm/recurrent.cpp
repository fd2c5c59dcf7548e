// One-token step of the selective scan; the naive scan is this step in a loop.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "internal.h"

namespace seqmix::ops {

// u_t, delta_t [B,C], b_t, c_t [B,N], state [B,C,N] -> (y_t [B,C], the new state); the state given is not modified.
SsmStepCall::Result ssm_step_op(const SsmStepCall& call) {
  const at::Tensor &u_t = call.u_t, &delta_t = call.delta_t, &A = call.A, &b_t = call.b_t, &c_t = call.c_t;
  const at::Tensor& state = call.state;
  const char* op = "ssm_step";
  check_rank(u_t, op, "u_t", 2, "B,C");
  check_rank(delta_t, op, "delta_t", 2, "B,C");
  check_rank(b_t, op, "b_t", 2, "B,N");
  check_rank(c_t, op, "c_t", 2, "B,N");
  check_rank(A, op, "A", 2, "C,N");
  check_rank(state, op, "state", 3, "B,C,N");
  TORCH_CHECK(delta_t.sizes() == u_t.sizes(), op, ": delta_t must have the shape of u_t (got ", delta_t.sizes(),
              " and ", u_t.sizes(), ")");
  TORCH_CHECK(b_t.sizes() == c_t.sizes(), op, ": b_t and c_t must have the same shape (got ", b_t.sizes(), " and ",
              c_t.sizes(), ")");
  check_same_size(A, 0, u_t, 1, op, "channel counts of A and u_t");
  check_same_size(A, 1, b_t, 1, op, "state sizes of A and b_t");
  check_same_size(u_t, 0, b_t, 0, op, "batch sizes of u_t and b_t");
  TORCH_CHECK(state.sizes() == at::IntArrayRef({u_t.size(0), A.size(0), A.size(1)}), op, ": state must be [B,C,N] = [",
              u_t.size(0), ",", A.size(0), ",", A.size(1), "] (got ", state.sizes(), ")");
  check_state_dtype(op, u_t, {state});
  auto decay = (delta_t.unsqueeze(-1) * A).exp();                 // [B,C,N]
  auto input = (delta_t * u_t).unsqueeze(-1) * b_t.unsqueeze(1);  // [B,C,N]
  const at::Tensor next = decay * state + input;
  return {(next * c_t.unsqueeze(1)).sum(-1), next};               // [B,C], [B,C,N]
}

}  // namespace seqmix::ops
