// The autograd Function joining the causal Hadamard Exp scan and its hand-written backward.
#include <torch/torch.h>

#include "fused_kernels.h"

namespace seqmix::ops {
namespace {

class HadamardScan : public torch::autograd::Function<HadamardScan> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                                                const torch::Tensor& k, const torch::Tensor& v) {
    auto r = hadamard_scan_forward(q, k, v);
    ctx->save_for_backward({q, k, v, r.y, r.normaliser, r.key_max});
    return {r.y};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto s = ctx->get_saved_variables();
    return hadamard_scan_backward(grads[0], s[0], s[1], s[2], {s[3], s[4], s[5]});
  }
};

}  // namespace

at::Tensor hadamard_scan(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return HadamardScan::apply(q, k, v)[0];
}

}  // namespace seqmix::ops
