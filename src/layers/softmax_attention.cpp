#include "seqmix/layers/softmax_attention.h"

#include <cmath>

#include <torch/torch.h>

#include "seqmix/ops/attention.h"

namespace seqmix {

SoftmaxAttentionImpl::SoftmaxAttentionImpl(const SoftmaxAttentionOptions& options)
    : KVAttentionImpl("softmax", options),
      scale_(options.scale > 0 ? options.scale
                               : 1.0 / std::sqrt(static_cast<double>(options.dim / options.heads))),
      impl_(options.impl) {}

torch::Tensor SoftmaxAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k,
                                           const torch::Tensor& v, bool causal) {
  return ops::softmax_attention(q, k, v, causal, scale_, {}, impl_);
}

}  // namespace seqmix
