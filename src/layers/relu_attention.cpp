#include "seqmix/layers/relu_attention.h"

#include <torch/torch.h>

#include "seqmix/ops/attention.h"

namespace seqmix {

ReluAttentionImpl::ReluAttentionImpl(const ReluAttentionOptions& options)
    : KVAttentionImpl("relu", options), eps_(options.eps) {}

torch::Tensor ReluAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, bool causal) {
  return ops::relu_attention_naive(q, k, v, causal, eps_);
}

}  // namespace seqmix
