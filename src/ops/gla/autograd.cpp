// The autograd Function joining the fused GLA scan and its hand-written backward. Both kernels are operators of
// their own (torch.ops.seqmix._gla_forward/_gla_backward, with Meta kernels), which the Function calls through
// the dispatcher, so torch.compile traces them as two nodes on fake tensors.
#include <torch/torch.h>

#include "../common/checks.h"
#include "../common/kernel_operators.h"
#include "../common/torch_op.h"
#include "fused_kernels.h"
#include "seqmix/ops/gla.h"

namespace seqmix::ops {
namespace {

using Tensors = std::vector<at::Tensor>;

// The shapes gla_fused_forward makes: numerator [B,T,H,dv], normaliser [B,T,H], states [B,H,capacity,dk,dv+1].
Tensors forward_meta(const GlaForwardCall& call) {
  const at::Tensor &q = call.q, &v = call.v;
  const auto B = q.sym_size(0), T = q.sym_size(1), H = q.sym_size(2), dk = q.sym_size(3), dv = v.sym_size(3);
  const c10::SymInt sequences = call.cu_seqlens.has_value() ? call.cu_seqlens->sym_size(0) - 1 : c10::SymInt(0);
  const auto chunks = chunk_capacity(T, sequences, gla_kernel::kChunk);
  return {empty_meta(q, {B, T, H, dv}), empty_meta(q, {B, T, H}), empty_meta(q, {B, H, chunks, dk, dv + 1})};
}

Tensors backward_meta(const GlaBackwardCall& call) {
  return {at::empty_like(call.q), at::empty_like(call.k), at::empty_like(call.v), at::empty_like(call.log_decay)};
}

class FusedGla : public torch::autograd::Function<FusedGla> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                                                const torch::Tensor& k, const torch::Tensor& v,
                                                const torch::Tensor& log_decay, const torch::Tensor& cu_seqlens) {
    auto r = kernel::gla_forward(q, k, v, log_decay, given(cu_seqlens));
    ctx->save_for_backward({q, k, v, log_decay, r[2], cu_seqlens});
    return {r[0], r[1]};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto s = ctx->get_saved_variables();
    auto g = kernel::gla_backward(grads[0], grads[1], s[0], s[1], s[2], s[3], s[4], given(s[5]));
    g.push_back(torch::Tensor());  // cu_seqlens
    return g;
  }
};

}  // namespace

PriorRead gla_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_decay,
                    const at::Tensor& cu_seqlens) {
  // Before apply: autograd refuses an undefined input with a message that names no op.
  TORCH_CHECK(log_decay.defined(), "gla_fused: log_decay is required ([B,T,H] or [B,T,H,dk])");
  auto out = FusedGla::apply(q, k, v, log_decay, as_argument(cu_seqlens, torch::kLong));
  PriorRead read;
  read.numerator = out[0];
  read.normaliser = out[1];
  return read;
}

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_kernel<&gla_kernel::gla_fused_forward, &forward_meta>(
      m, "_gla_forward(Tensor q, Tensor k, Tensor v, Tensor log_decay, Tensor? cu_seqlens) -> Tensor[]");
  define_kernel<&gla_kernel::gla_fused_backward, &backward_meta>(
      m, "_gla_backward(Tensor grad_numerator, Tensor grad_normaliser, Tensor q, Tensor k, Tensor v, "
         "Tensor log_decay, Tensor states, Tensor? cu_seqlens) -> Tensor[]");
}
