// The autograd Function joining the fused attention forward and its hand-written backward.
#include <torch/torch.h>

#include "seqmix/ops/attention.h"

namespace seqmix::ops {
namespace {

class FusedSoftmaxAttention : public torch::autograd::Function<FusedSoftmaxAttention> {
 public:
  // key_mask: bool [B,S], or an empty tensor for none (autograd arguments must be defined tensors).
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, bool causal, double scale, const torch::Tensor& key_mask) {
    const auto mask = key_mask.numel() > 0 ? key_mask : torch::Tensor();
    auto r = softmax_attention_fused_forward(q, k, v, causal, scale, mask);
    ctx->save_for_backward({q, k, v, r.out, r.lse, key_mask});
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    return r.out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto s = ctx->get_saved_variables();
    auto g = softmax_attention_fused_backward(grads[0], s[0], s[1], s[2], s[3], s[4], ctx->saved_data["causal"].toBool(),
                                              ctx->saved_data["scale"].toDouble(), s[5].numel() > 0 ? s[5] : torch::Tensor());
    return {g[0], g[1], g[2], torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

at::Tensor softmax_attention_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                   double scale, const at::Tensor& key_mask) {
  return FusedSoftmaxAttention::apply(q, k, v, causal, scale,
                                      key_mask.defined() ? key_mask : torch::empty({0}, torch::kBool));
}

}  // namespace seqmix::ops
