#pragma once
// Multi-head normalised linear attention: y_t = sum_{i<=t} (phi(q_t).phi(k_i)) v_i / sum_{i<=t} phi(q_t).phi(k_i).
#include <torch/nn/modules/linear.h>

#include "seqmix/ops/impl.h"
#include "seqmix/layers/mixer.h"
#include "seqmix/modules/feature_map.h"

namespace seqmix {

class PriorImpl;

// value projection -> the linear prior's read (src/layers/priors/linear.cpp) -> output projection.
struct LinearAttentionOptions {
  ops::Impl impl = ops::Impl::fused;  // fused kernel, or its naive twin
  int64_t dim = 128;
  int64_t heads = 4;
  FeatureMap feature = FeatureMap::Relu;  // must be positive
  double eps = 1e-6;                      // feature offset and normaliser floor
  bool rope = false;                      // RoPE on q and k before the feature map
  double rope_theta = 10000.0;
  bool bias = true;
  bool causal = true;
};

class LinearAttentionImpl : public MixerImpl {
 public:
  explicit LinearAttentionImpl(const LinearAttentionOptions& options);
  torch::Tensor forward(const torch::Tensor& x) override;
  DecodeState init_state(int64_t batch) const override;
  torch::Tensor step(const torch::Tensor& x_t, DecodeState& state) override;

  torch::nn::Linear out{nullptr};

 private:
  std::shared_ptr<PriorImpl> prior_;  // the linear prior; its qkv Linear is registered here
  LinearAttentionOptions options_;
  int64_t head_dim_;
};

// The mixer's declaration for the registry (options, defaults, checks): beside the layer, in its .cpp.
struct MixerDeclaration;
const MixerDeclaration& linear_mixer_declaration();

}  // namespace seqmix
