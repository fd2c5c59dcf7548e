// The autograd Function joining the fused attention forward and its hand-written backward. Both kernels are
// operators of their own (torch.ops.seqmix._attention_forward/_backward, with Meta kernels) that the Function
// calls through the dispatcher, so torch.compile traces them on fake tensors.
#include <torch/torch.h>

#include "../common/checks.h"
#include "../common/packing.h"
#include "../common/padding.h"
#include "../common/kernel_operators.h"
#include "../common/torch_op.h"
#include "seqmix/ops/attention.h"

namespace seqmix::ops {
namespace {

using Tensors = std::vector<at::Tensor>;

// {out [B,T,H,dv], lse [B,H,T]}
Tensors forward_cpu(const AttentionForwardCall& call) {
  auto r = softmax_attention_fused_forward(call.q, call.k, call.v, call.causal, call.scale,
                                           or_undefined(call.key_mask), or_undefined(call.cu_seqlens));
  return {r.out, r.lse};
}
Tensors forward_meta(const AttentionForwardCall& call) {
  const at::Tensor& q = call.q;
  const auto B = q.sym_size(0), T = q.sym_size(1), H = q.sym_size(2);
  return {empty_meta(q, {B, T, H, call.v.sym_size(3)}), empty_meta(q, {B, H, T})};
}
// {dq, dk, dv}
Tensors backward_cpu(const AttentionBackwardCall& call) {
  return softmax_attention_fused_backward(call.grad_out, call.q, call.k, call.v, call.out, call.lse, call.causal,
                                          call.scale, or_undefined(call.key_mask), or_undefined(call.cu_seqlens));
}
Tensors backward_meta(const AttentionBackwardCall& call) {
  return {at::empty_like(call.q), at::empty_like(call.k), at::empty_like(call.v)};
}


class FusedSoftmaxAttention : public torch::autograd::Function<FusedSoftmaxAttention> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, bool causal, double scale, const torch::Tensor& key_mask,
                               const torch::Tensor& cu_seqlens) {
    auto r = kernel::attention_forward(q, k, v, causal, scale, given(key_mask), given(cu_seqlens));
    ctx->save_for_backward({q, k, v, r[0], r[1], key_mask, cu_seqlens});
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    return r[0];
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto s = ctx->get_saved_variables();
    auto g = kernel::attention_backward(grads[0], s[0], s[1], s[2], s[3], s[4], ctx->saved_data["causal"].toBool(),
                         ctx->saved_data["scale"].toDouble(), given(s[5]), given(s[6]));
    return {g[0], g[1], g[2], torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

at::Tensor softmax_attention_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                   double scale, const at::Tensor& key_mask, const at::Tensor& cu_seqlens) {
  const char* op = "softmax_attention_fused";
  const at::Tensor offsets = as_argument(cu_seqlens, torch::kLong);
  if (!key_mask.defined() && !cu_seqlens.defined())
    return FusedSoftmaxAttention::apply(q, k, v, causal, scale, as_argument({}, torch::kBool), offsets);
  // Checked here first: the padding below reads the shapes.
  check_attention_args(op, q, k, v);
  check_key_mask(op, key_mask, k.size(0), k.size(1));
  check_packed_attention(op, q, k, key_mask, cu_seqlens);
  const AttentionInputs in = finite_masked_positions(op, q, k, v, key_mask);
  return FusedSoftmaxAttention::apply(in.q, in.k, in.v, causal, scale, as_argument(key_mask, torch::kBool), offsets);
}

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_kernel<&forward_cpu, &forward_meta>(
      m, "_attention_forward(Tensor q, Tensor k, Tensor v, bool causal, float scale, Tensor? key_mask, "
         "Tensor? cu_seqlens) -> Tensor[]");
  define_kernel<&backward_cpu, &backward_meta>(
      m, "_attention_backward(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, bool causal, "
         "float scale, Tensor? key_mask, Tensor? cu_seqlens) -> Tensor[]");
}
