// Ground-truth selective scan: the recurrence itself, one plain ATen step per token.
#include <ATen/ATen.h>

#include <vector>

#include "../common/checks.h"
#include "../common/packing.h"
#include "internal.h"

namespace seqmix::ops {

at::Tensor ssm_scan_naive(const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A,
                          const at::Tensor& b, const at::Tensor& c, const at::Tensor& cu_seqlens) {
  check_ssm_args("ssm_scan_naive", u, delta, A, b, c);
  check_cu_seqlens("ssm_scan_naive", cu_seqlens, u.size(0), u.size(1));
  if (u.size(1) == 0) return at::empty_like(u);
  std::vector<at::Tensor> ys;
  ys.reserve(u.size(1));
  for (const Segment& sequence : sequence_segments(cu_seqlens, u.size(1))) {
    at::Tensor state = at::zeros({u.size(0), u.size(2), A.size(1)}, u.options());  // each sequence from zero
    for (int64_t t = sequence.begin; t < sequence.end; ++t) {
      auto [y, next] = ssm_step_op(SsmStepCall{.u_t = u.select(1, t),
                                               .delta_t = delta.select(1, t),
                                               .A = A,
                                               .b_t = b.select(1, t),
                                               .c_t = c.select(1, t),
                                               .state = state});
      ys.push_back(y);
      state = next;
    }
  }
  return at::stack(ys, 1);
}

}  // namespace seqmix::ops
