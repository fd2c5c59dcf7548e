// The autograd Function joining the fused selective scan and its hand-written chunked reverse scan.
#include <torch/torch.h>

#include "fused_kernels.h"
#include "seqmix/ops/ssm.h"

namespace seqmix::ops {
namespace {

class FusedSsmScan : public torch::autograd::Function<FusedSsmScan> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& u, const torch::Tensor& delta,
                               const torch::Tensor& A, const torch::Tensor& b, const torch::Tensor& c) {
    auto r = ssm_scan_fused_forward(u, delta, A, b, c);
    ctx->save_for_backward({u, delta, A, b, c, r.checkpoints});
    return r.y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto s = ctx->get_saved_variables();
    return ssm_scan_fused_backward(grads[0], s[0], s[1], s[2], s[3], s[4], s[5]);
  }
};

}  // namespace

at::Tensor ssm_scan_fused(const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A, const at::Tensor& b,
                          const at::Tensor& c) {
  return FusedSsmScan::apply(u, delta, A, b, c);
}

}  // namespace seqmix::ops
