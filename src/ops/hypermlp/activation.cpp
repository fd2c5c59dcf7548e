#include "activation.h"

namespace seqmix::ops::hypermlp {

Activated activate(const at::Tensor& h, const at::Tensor& visible, const HyperReadOptions& options) {
  switch (options.activation) {
    case HyperActivation::softmax:
      return {at::softmax(h.masked_fill(visible.logical_not(), -std::numeric_limits<double>::infinity()), -1), {}};
    case HyperActivation::relu:
      return {at::relu(h), at::rsqrt(h.square().sum(-1, true) + options.eps)};
    case HyperActivation::glu: {
      const int64_t heads = h.size(1) / 2;
      auto gate = h.narrow(1, 0, heads), scale = h.narrow(1, heads, heads);
      return {at::softplus(scale) * at::relu(gate), at::rsqrt(gate.square().sum(-1, true) + options.eps)};
    }
  }
  throw std::logic_error("hypermlp: unknown activation");
}

}  // namespace seqmix::ops::hypermlp
