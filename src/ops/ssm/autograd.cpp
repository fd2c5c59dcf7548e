// The autograd Function joining the fused selective scan and its hand-written chunked reverse scan. Both kernels
// are operators of their own (torch.ops.seqmix._ssm_scan_forward/_backward, with Meta kernels) that the Function
// calls through the dispatcher, so torch.compile traces them on fake tensors.
#include <torch/torch.h>

#include "../common/torch_op.h"
#include "fused_kernels.h"
#include "seqmix/ops/ssm.h"

namespace seqmix::ops {
namespace {

using Tensors = std::vector<at::Tensor>;
using ForwardKernel = Tensors(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                              const at::Tensor&);
using BackwardKernel = Tensors(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                               const at::Tensor&, const at::Tensor&, const at::Tensor&);

// {y [B,T,C], checkpoints [B,chunks,N,C]} (the state every kSsmCheckpointEvery positions)
Tensors forward_cpu(const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A, const at::Tensor& b,
                    const at::Tensor& c) {
  auto r = ssm_scan_fused_forward(u, delta, A, b, c);
  return {r.y, r.checkpoints};
}
Tensors forward_meta(const at::Tensor& u, const at::Tensor&, const at::Tensor& A, const at::Tensor&, const at::Tensor&) {
  const auto chunks = (u.sym_size(1) + kSsmCheckpointEvery - 1) / kSsmCheckpointEvery;
  return {at::empty_like(u), empty_meta(u, {u.sym_size(0), chunks, A.sym_size(1), u.sym_size(2)})};
}
// {du, ddelta, dA, db, dc}
Tensors backward_cpu(const at::Tensor& grad_y, const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A,
                     const at::Tensor& b, const at::Tensor& c, const at::Tensor& checkpoints) {
  return ssm_scan_fused_backward(grad_y, u, delta, A, b, c, checkpoints);
}
Tensors backward_meta(const at::Tensor&, const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A,
                      const at::Tensor& b, const at::Tensor& c, const at::Tensor&) {
  return {at::empty_like(u), at::empty_like(delta), at::empty_like(A), at::empty_like(b), at::empty_like(c)};
}

class FusedSsmScan : public torch::autograd::Function<FusedSsmScan> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& u, const torch::Tensor& delta,
                               const torch::Tensor& A, const torch::Tensor& b, const torch::Tensor& c) {
    static const auto kernel = kernel_op<ForwardKernel>("seqmix::_ssm_scan_forward");
    auto r = kernel_call(kernel, u, delta, A, b, c);
    ctx->save_for_backward({u, delta, A, b, c, r[1]});
    return r[0];
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    static const auto kernel = kernel_op<BackwardKernel>("seqmix::_ssm_scan_backward");
    auto s = ctx->get_saved_variables();
    return kernel_call(kernel, grads[0], s[0], s[1], s[2], s[3], s[4], s[5]);
  }
};

}  // namespace

at::Tensor ssm_scan_fused(const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A, const at::Tensor& b,
                          const at::Tensor& c) {
  return FusedSsmScan::apply(u, delta, A, b, c);
}

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_kernel<&forward_cpu, &forward_meta>(
      m, "_ssm_scan_forward(Tensor u, Tensor delta, Tensor A, Tensor b, Tensor c) -> Tensor[]");
  define_kernel<&backward_cpu, &backward_meta>(
      m, "_ssm_scan_backward(Tensor grad_y, Tensor u, Tensor delta, Tensor A, Tensor b, Tensor c, "
         "Tensor checkpoints) -> Tensor[]");
}
