// Ground-truth selective scan: the recurrence itself, one plain ATen step per token.
#include <ATen/ATen.h>

#include <vector>

#include "../common/checks.h"
#include "seqmix/ops/ssm.h"

namespace seqmix::ops {

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
