// The autograd Function joining the fused GLA scan and its hand-written backward.
#include <torch/torch.h>

#include "../common/checks.h"
#include "fused_kernels.h"
#include "seqmix/ops/gla.h"

namespace seqmix::ops {
namespace {

class FusedGla : public torch::autograd::Function<FusedGla> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                                                const torch::Tensor& k, const torch::Tensor& v,
                                                const torch::Tensor& log_decay) {
    auto r = gla_kernel::gla_fused_forward(q, k, v, log_decay);
    ctx->save_for_backward({q, k, v, log_decay, r[2]});
    return {r[0], r[1]};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto s = ctx->get_saved_variables();
    return gla_kernel::gla_fused_backward(grads[0], grads[1], s[0], s[1], s[2], s[3], s[4]);
  }
};

}  // namespace

PriorRead gla_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_decay) {
  // Before apply: autograd refuses an undefined input with a message that names no op.
  check_rank(log_decay, "gla_fused", "log_decay", 3, "B,T,H");
  auto out = FusedGla::apply(q, k, v, log_decay);
  PriorRead read;
  read.numerator = out[0];
  read.normaliser = out[1];
  return read;
}

}  // namespace seqmix::ops
