// The fused FEM softmax read as an autograd op: value clamp, scaling, the read and F = L / beta all run
// in the kernel pair, which returns the gradients of q, k, v and beta. Both kernels are operators of their own
// (torch.ops.seqmix._fem_softmax_forward/_backward, with Meta kernels) that the Function calls through the
// dispatcher, so torch.compile traces them on fake tensors. Their CUDA kernels register themselves from
// fused_cuda.cpp.
#include <torch/torch.h>

#include "../common/checks.h"
#include "../common/padding.h"
#include "../common/kernel_operators.h"
#include "../common/torch_op.h"
#include "fused_kernels.h"
#include "seqmix/ops/fem.h"

namespace seqmix::ops {
namespace {

using Tensors = std::vector<at::Tensor>;

// The saved tensors are float32 where the CUDA kernel reads reduced precision (fused_kernels.h).
Tensors forward_meta(const FemSoftmaxForwardCall& call) {
  const at::Tensor& q = call.q;
  const auto B = q.sym_size(0), T = q.sym_size(1), H = q.sym_size(2), dv = call.v.sym_size(3);
  const bool reduced = q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf;
  const auto options = reduced ? q.options().dtype(at::kFloat) : q.options();
  return {at::empty_symint({B, T, H, dv}, options), at::empty_symint({B, T, H, dv}, options),
          at::empty_symint({B, H, T}, options)};
}
// {dq, dk, dv, dbeta}
Tensors backward_meta(const FemSoftmaxBackwardCall& call) {
  return {at::empty_like(call.q), at::empty_like(call.k), at::empty_like(call.v), at::empty_like(call.beta)};
}


class FusedFemSoftmaxRead : public torch::autograd::Function<FusedFemSoftmaxRead> {
 public:
  // Returns {mu, F}. key_mask: bool [B,S], or an empty tensor for none.
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                                                const torch::Tensor& k, const torch::Tensor& v,
                                                const torch::Tensor& beta, double cap, bool causal, double scale,
                                                const torch::Tensor& key_mask) {
    auto r = kernel::fem_softmax_forward(q, k, v, beta, cap, causal, scale, given(key_mask));
    ctx->save_for_backward({q, k, v, beta, r[0], r[1], r[2], key_mask});
    ctx->saved_data["cap"] = cap;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    return {r[0].to(q.scalar_type()), r[1].to(q.scalar_type())};  // the CUDA kernel's are float32
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto s = ctx->get_saved_variables();
    auto g = kernel::fem_softmax_backward(grads[0], grads[1], s[0], s[1], s[2], s[3], s[4], s[5], s[6],
                         ctx->saved_data["cap"].toDouble(), ctx->saved_data["causal"].toBool(),
                         ctx->saved_data["scale"].toDouble(), given(s[7]));
    return {g[0], g[1], g[2], g[3], torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

FemRead fem_softmax_read_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                               double cap, bool causal, double scale, const at::Tensor& key_mask) {
  const char* op = "fem_softmax_read_fused";
  check_rank(v, op, "v", 4, "B,S,H,dv");
  check_same_float_dtype(op, {q, k, v, beta});
  if (key_mask.defined()) {
    check_attention_args(op, q, k, v);
    check_key_mask(op, key_mask, k.size(0), k.size(1));
  }
  const AttentionInputs in = finite_masked_positions(op, q, k, v, key_mask);
  auto read = FusedFemSoftmaxRead::apply(in.q, in.k, in.v, beta, cap, causal, scale,
                                         as_argument(key_mask, torch::kBool));
  return {read[0], read[1]};
}

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_kernel<&fem_softmax_read_fused_forward, &forward_meta>(
      m, "_fem_softmax_forward(Tensor q, Tensor k, Tensor v, Tensor beta, float cap, bool causal, float scale, "
         "Tensor? key_mask) -> Tensor[]");
  define_kernel<&fem_softmax_read_fused_backward, &backward_meta>(
      m, "_fem_softmax_backward(Tensor d_mean, Tensor d_free, Tensor q, Tensor k, Tensor v, Tensor beta, Tensor mean, "
         "Tensor free_energy, Tensor lse, float cap, bool causal, float scale, Tensor? key_mask) -> Tensor[]");
}
