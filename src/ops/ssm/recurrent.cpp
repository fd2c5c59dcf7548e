// One-token step of the selective scan; the naive scan is this step in a loop.
#include <ATen/ATen.h>

#include "../checks.h"
#include "seqmix/ops/ssm.h"

namespace seqmix::ops {

at::Tensor ssm_step(const at::Tensor& u_t, const at::Tensor& delta_t, const at::Tensor& A,
                    const at::Tensor& b_t, const at::Tensor& c_t, at::Tensor& state) {
  const char* op = "ssm_step";
  check_rank(u_t, op, "u_t", 2, "B,C");
  check_rank(delta_t, op, "delta_t", 2, "B,C");
  check_rank(b_t, op, "b_t", 2, "B,N");
  check_rank(c_t, op, "c_t", 2, "B,N");
  check_rank(state, op, "state", 3, "B,C,N");
  auto decay = (delta_t.unsqueeze(-1) * A).exp();                 // [B,C,N]
  auto input = (delta_t * u_t).unsqueeze(-1) * b_t.unsqueeze(1);  // [B,C,N]
  state = decay * state + input;
  return (state * c_t.unsqueeze(1)).sum(-1);                      // [B,C]
}

}  // namespace seqmix::ops
