// The autograd Function joining the fused AFT forward and its hand-written reverse scan.
#include <torch/torch.h>

#include "fused_kernels.h"
#include "seqmix/ops/aft.h"

namespace seqmix::ops {
namespace {

class FusedAft : public torch::autograd::Function<FusedAft> {
 public:
  // mask: bool [B,T], or an empty tensor for none (autograd arguments must be defined tensors).
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& k,
                                                const torch::Tensor& v, const torch::Tensor& mask) {
    auto r = aft_fused_forward(k, v, mask.numel() > 0 ? mask : torch::Tensor());
    ctx->save_for_backward({k, v, mask, r.numerator, r.normaliser, r.key_max});
    return {r.numerator, r.normaliser};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto s = ctx->get_saved_variables();
    // An output that did not reach the loss has no gradient: it contributes zero.
    auto grad_or_zero = [&](const torch::Tensor& g) { return g.defined() ? g : torch::zeros_like(s[0]); };
    auto g = aft_fused_backward(grad_or_zero(grads[0]), grad_or_zero(grads[1]), s[0], s[1],
                                s[2].numel() > 0 ? s[2] : torch::Tensor(), s[3], s[4], s[5]);
    return {g[0], g[1], torch::Tensor()};
  }
};

}  // namespace

PriorRead aft_fused(const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask) {
  auto out = FusedAft::apply(k, v, mask.defined() ? mask : torch::empty({0}, torch::kBool));
  return {out[0], out[1]};
}

}  // namespace seqmix::ops
