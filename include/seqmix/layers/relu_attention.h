#pragma once
// Multi-head ReLU attention (HyperMLP's "R"): ReLU(L2Norm_t(q_t K^T)) V per head, no score scale
// (the row L2 norm makes it scale-free).
#include "seqmix/layers/kv_attention.h"
#include "seqmix/layers/mixer_spec.h"

namespace seqmix {

struct ReluAttentionOptions : KVAttentionOptions {
  double eps = 1e-12;  // under the square root of the row norm
};

class ReluAttentionImpl : public KVAttentionImpl {
 public:
  explicit ReluAttentionImpl(const ReluAttentionOptions& options);

 protected:
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       bool causal) override;

 private:
  double eps_;
};

// The mixer's declaration for the registry (options, defaults, checks): beside the layer, in its .cpp.
const MixerDeclaration& relu_mixer_declaration();

}  // namespace seqmix
