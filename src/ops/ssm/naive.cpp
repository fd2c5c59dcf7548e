// Ground-truth selective scan: the recurrence itself, one plain ATen step per token.
#include <ATen/ATen.h>

#include <vector>

#include "../checks.h"
#include "seqmix/ops/ssm.h"

namespace seqmix::ops {
namespace {

void check_ssm_args(const char* op, const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A,
                    const at::Tensor& b, const at::Tensor& c) {
  check_rank(u, op, "u", 3, "B,T,C");
  check_rank(delta, op, "delta", 3, "B,T,C");
  check_rank(A, op, "A", 2, "C,N");
  check_rank(b, op, "b", 3, "B,T,N");
  check_rank(c, op, "c", 3, "B,T,N");
  check_same_float_dtype(op, {u, delta, A, b, c});
  TORCH_CHECK(delta.sizes() == u.sizes(), op, ": delta must have the shape of u (got ", delta.sizes(),
              " and ", u.sizes(), ")");
  TORCH_CHECK(b.sizes() == c.sizes(), op, ": b and c must have the same shape (got ", b.sizes(), " and ",
              c.sizes(), ")");
  check_same_size(A, 0, u, 2, op, "channel counts of A and u");
  check_same_size(A, 1, b, 2, op, "state sizes of A and b");
  check_same_size(u, 0, b, 0, op, "batch sizes of u and b");
  check_same_size(u, 1, b, 1, op, "lengths of u and b");
}

}  // namespace

at::Tensor ssm_scan_naive(const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A,
                          const at::Tensor& b, const at::Tensor& c) {
  check_ssm_args("ssm_scan_naive", u, delta, A, b, c);
  auto state = at::zeros({u.size(0), u.size(2), A.size(1)}, u.options());
  std::vector<at::Tensor> ys;
  ys.reserve(u.size(1));
  for (int64_t t = 0; t < u.size(1); ++t)
    ys.push_back(ssm_step(u.select(1, t), delta.select(1, t), A, b.select(1, t), c.select(1, t), state));
  return at::stack(ys, 1);
}

}  // namespace seqmix::ops
