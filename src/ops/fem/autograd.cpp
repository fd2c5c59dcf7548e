// The fused FEM softmax read as an autograd op: value clamp, scaling, the read and F = L / beta all run
// in the kernel pair, which returns the gradients of q, k, v and beta.
#include <torch/torch.h>

#include "../common/checks.h"
#include "fused_kernels.h"
#include "seqmix/ops/fem.h"

namespace seqmix::ops {
namespace {

class FusedFemSoftmaxRead : public torch::autograd::Function<FusedFemSoftmaxRead> {
 public:
  // Returns {mu, F}. key_mask: bool [B,S], or an empty tensor for none.
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                                                const torch::Tensor& k, const torch::Tensor& v,
                                                const torch::Tensor& beta, double cap, bool causal, double scale,
                                                const torch::Tensor& key_mask) {
    const auto mask = key_mask.numel() > 0 ? key_mask : torch::Tensor();
    auto r = fem_softmax_read_fused_forward(q, k, v, beta, cap, causal, scale, mask);
    ctx->save_for_backward({q, k, v, beta, r.mean, r.free_energy, r.lse, key_mask});
    ctx->saved_data["cap"] = cap;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    return {r.mean, r.free_energy};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto s = ctx->get_saved_variables();
    const FemReadForward saved{s[4], s[5], s[6]};
    auto g = fem_softmax_read_fused_backward(grads[0], grads[1], s[0], s[1], s[2], s[3], saved,
                                             ctx->saved_data["cap"].toDouble(), ctx->saved_data["causal"].toBool(),
                                             ctx->saved_data["scale"].toDouble(), s[7].numel() > 0 ? s[7] : torch::Tensor());
    return {g[0], g[1], g[2], g[3], torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

FemRead fem_softmax_read_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                               double cap, bool causal, double scale, const at::Tensor& key_mask) {
  check_rank(v, "fem_softmax_read_fused", "v", 4, "B,S,H,dv");
  check_same_float_dtype("fem_softmax_read_fused", {q, k, v, beta});
  auto read = FusedFemSoftmaxRead::apply(q, k, v, beta, cap, causal, scale,
                                         key_mask.defined() ? key_mask : torch::empty({0}, torch::kBool));
  return {read[0], read[1]};
}

}  // namespace seqmix::ops
