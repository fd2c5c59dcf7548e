// The autograd Function joining the fused selective scan and its hand-written chunked reverse scan. Both kernels
// are operators of their own (torch.ops.seqmix._ssm_scan_forward/_backward, with Meta kernels) that the Function
// calls through the dispatcher, so torch.compile traces them on fake tensors.
#include <torch/torch.h>

#include "../common/packing.h"
#include "../common/kernel_operators.h"
#include "../common/torch_op.h"
#include "fused_kernels.h"
#include "seqmix/ops/ssm.h"

namespace seqmix::ops {
namespace {

using Tensors = std::vector<at::Tensor>;

// {y [B,T,C], checkpoints [B,capacity,N,C]} (the state entering every chunk of kSsmCheckpointEvery positions)
Tensors forward_cpu(const SsmScanForwardCall& call) {
  auto r = ssm_scan_fused_forward(call.u, call.delta, call.A, call.b, call.c, or_undefined(call.cu_seqlens));
  return {r.y, r.checkpoints};
}
Tensors forward_meta(const SsmScanForwardCall& call) {
  const at::Tensor &u = call.u, &A = call.A;
  const c10::SymInt sequences = call.cu_seqlens.has_value() ? call.cu_seqlens->sym_size(0) - 1 : c10::SymInt(0);
  const auto chunks = chunk_capacity(u.sym_size(1), sequences, kSsmCheckpointEvery);
  return {at::empty_like(u), empty_meta(u, {u.sym_size(0), chunks, A.sym_size(1), u.sym_size(2)})};
}
Tensors backward_meta(const SsmScanBackwardCall& call) {
  return {at::empty_like(call.u), at::empty_like(call.delta), at::empty_like(call.A), at::empty_like(call.b),
          at::empty_like(call.c)};
}

class FusedSsmScan : public torch::autograd::Function<FusedSsmScan> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& u, const torch::Tensor& delta,
                               const torch::Tensor& A, const torch::Tensor& b, const torch::Tensor& c,
                               const torch::Tensor& cu_seqlens) {
    auto r = kernel::ssm_scan_forward(u, delta, A, b, c, given(cu_seqlens));
    ctx->save_for_backward({u, delta, A, b, c, r[1], cu_seqlens});
    return r[0];
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto s = ctx->get_saved_variables();
    auto g = kernel::ssm_scan_backward(grads[0], s[0], s[1], s[2], s[3], s[4], s[5], given(s[6]));
    g.push_back(torch::Tensor());  // cu_seqlens
    return g;
  }
};

}  // namespace

at::Tensor ssm_scan_fused(const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A, const at::Tensor& b,
                          const at::Tensor& c, const at::Tensor& cu_seqlens) {
  return FusedSsmScan::apply(u, delta, A, b, c, as_argument(cu_seqlens, torch::kLong));
}

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_kernel<&forward_cpu, &forward_meta>(
      m, "_ssm_scan_forward(Tensor u, Tensor delta, Tensor A, Tensor b, Tensor c, Tensor? cu_seqlens) -> Tensor[]");
  define_kernel<&ssm_scan_fused_backward, &backward_meta>(
      m, "_ssm_scan_backward(Tensor grad_y, Tensor u, Tensor delta, Tensor A, Tensor b, Tensor c, "
         "Tensor checkpoints, Tensor? cu_seqlens) -> Tensor[]");
}
