// The autograd Function joining the causal Hadamard Exp scan and its hand-written backward. Both kernels are
// operators of their own (torch.ops.seqmix._ela_hadamard_forward/_backward, with Meta kernels) that the Function
// calls through the dispatcher, so torch.compile traces them on fake tensors.
#include <torch/torch.h>

#include "../common/kernel_operators.h"
#include "../common/torch_op.h"
#include "fused_kernels.h"

namespace seqmix::ops {
namespace {

using Tensors = std::vector<at::Tensor>;

// {y [B,T,H,dv], normaliser [B,T,H], key_max [B,T,H,dk]}
Tensors forward_cpu(const ElaHadamardForwardCall& call) {
  auto r = hadamard_scan_forward(call.q, call.k, call.v);
  return {r.y, r.normaliser, r.key_max};
}
Tensors forward_meta(const ElaHadamardForwardCall& call) {
  const at::Tensor& q = call.q;
  const auto B = q.sym_size(0), T = q.sym_size(1), H = q.sym_size(2);
  return {empty_meta(q, {B, T, H, call.v.sym_size(3)}), empty_meta(q, {B, T, H}),
          empty_meta(q, {B, T, H, call.k.sym_size(3)})};
}
Tensors backward_meta(const ElaHadamardBackwardCall& call) {
  return {at::empty_like(call.q), at::empty_like(call.k), at::empty_like(call.v)};
}

class HadamardScan : public torch::autograd::Function<HadamardScan> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                                                const torch::Tensor& k, const torch::Tensor& v) {
    auto r = kernel::ela_hadamard_forward(q, k, v);
    ctx->save_for_backward({q, k, v, r[0], r[1], r[2]});
    return {r[0]};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto s = ctx->get_saved_variables();
    return kernel::ela_hadamard_backward(grads[0], s[0], s[1], s[2], s[3], s[4], s[5]);
  }
};

}  // namespace

at::Tensor hadamard_scan(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return HadamardScan::apply(q, k, v)[0];
}

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_kernel<&forward_cpu, &forward_meta>(m, "_ela_hadamard_forward(Tensor q, Tensor k, Tensor v) -> Tensor[]");
  define_kernel<&hadamard_scan_backward, &backward_meta>(
      m, "_ela_hadamard_backward(Tensor grad_y, Tensor q, Tensor k, Tensor v, Tensor y, Tensor normaliser, "
         "Tensor key_max) -> Tensor[]");
}
