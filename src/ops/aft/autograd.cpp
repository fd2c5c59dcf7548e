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
using Mask = c10::optional<at::Tensor>;

// {numerator, normaliser, key_max}, each [B,T,C].
Tensors forward_cpu(const at::Tensor& k, const at::Tensor& v, const Mask& mask, const Mask& cu_seqlens) {
  auto r = aft_fused_forward(k, v, or_undefined(mask), or_undefined(cu_seqlens));
  return {r.numerator, r.normaliser, r.key_max};
}
Tensors forward_meta(const at::Tensor& k, const at::Tensor&, const Mask&, const Mask&) {
  return {at::empty_like(k), at::empty_like(k), at::empty_like(k)};
}
// {dk, dv}
Tensors backward_cpu(const at::Tensor& grad_numerator, const at::Tensor& grad_normaliser, const at::Tensor& k,
                     const at::Tensor& v, const Mask& mask, const at::Tensor& numerator, const at::Tensor& normaliser,
                     const at::Tensor& key_max, const Mask& cu_seqlens) {
  return aft_fused_backward(grad_numerator, grad_normaliser, k, v, or_undefined(mask), numerator, normaliser, key_max,
                            or_undefined(cu_seqlens));
}
Tensors backward_meta(const at::Tensor&, const at::Tensor&, const at::Tensor& k, const at::Tensor& v, const Mask&,
                      const at::Tensor&, const at::Tensor&, const at::Tensor&, const Mask&) {
  return {at::empty_like(k), at::empty_like(v)};
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
  define_kernel<&forward_cpu, &forward_meta>(
      m, "_aft_forward(Tensor k, Tensor v, Tensor? mask, Tensor? cu_seqlens) -> Tensor[]");
  define_kernel<&backward_cpu, &backward_meta>(
      m, "_aft_backward(Tensor grad_numerator, Tensor grad_normaliser, Tensor k, Tensor v, Tensor? mask, "
         "Tensor numerator, Tensor normaliser, Tensor key_max, Tensor? cu_seqlens) -> Tensor[]");
}
