// The autograd Function joining the fused AFT forward and its hand-written reverse scan. Both kernels are
// operators of their own (torch.ops.seqmix._aft_forward/_aft_backward, with Meta kernels) that the Function
// calls through the dispatcher, so torch.compile traces them on fake tensors.
#include <torch/torch.h>

#include "../common/checks.h"
#include "../common/padding.h"
#include "../common/kernel_operators.h"
#include "../common/torch_op.h"
#include "fused_kernels.h"
#include "seqmix/ops/aft.h"

namespace seqmix::ops {
namespace {

using Tensors = std::vector<at::Tensor>;

// The shapes aft_fused_forward makes: {numerator, normaliser, key_max}, each [B,T,C].
Tensors forward_meta(const AftForwardCall& call) {
  return {at::empty_like(call.k), at::empty_like(call.k), at::empty_like(call.k)};
}
// {dk, dv}
Tensors backward_meta(const AftBackwardCall& call) {
  return {at::empty_like(call.k), at::empty_like(call.v)};
}


class FusedAft : public torch::autograd::Function<FusedAft> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& k,
                                                const torch::Tensor& v, const torch::Tensor& mask,
                                                const torch::Tensor& cu_seqlens) {
    auto r = kernel::aft_forward(k, v, given(mask), given(cu_seqlens));
    ctx->save_for_backward({k, v, mask, r[0], r[1], r[2], cu_seqlens});
    return {r[0], r[1]};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto s = ctx->get_saved_variables();
    // An output that did not reach the loss has no gradient: it contributes zero.
    auto grad_or_zero = [&](const torch::Tensor& g) { return g.defined() ? g : torch::zeros_like(s[0]); };
    auto g = kernel::aft_backward(grad_or_zero(grads[0]), grad_or_zero(grads[1]), s[0], s[1], given(s[2]), s[3], s[4],
                         s[5], given(s[6]));
    return {g[0], g[1], torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

PriorRead aft_fused(const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask, const at::Tensor& cu_seqlens) {
  if (mask.defined()) check_aft_args("aft_fused", k, v, mask);  // the padding below reads the shapes
  auto out = FusedAft::apply(finite_padding("aft_fused", "k", k, mask), finite_padding("aft_fused", "v", v, mask),
                             as_argument(mask, torch::kBool), as_argument(cu_seqlens, torch::kLong));
  return {out[0], out[1]};
}

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_kernel<&aft_fused_forward, &forward_meta>(
      m, "_aft_forward(Tensor k, Tensor v, Tensor? mask, Tensor? cu_seqlens) -> Tensor[]");
  define_kernel<&aft_fused_backward, &backward_meta>(
      m, "_aft_backward(Tensor grad_numerator, Tensor grad_normaliser, Tensor k, Tensor v, Tensor? mask, "
         "Tensor numerator, Tensor normaliser, Tensor key_max, Tensor? cu_seqlens) -> Tensor[]");
}
