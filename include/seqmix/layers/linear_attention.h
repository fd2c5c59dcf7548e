#pragma once
// Multi-head normalised linear attention: y_t = sum_{i<=t} (phi(q_t).phi(k_i)) v_i / sum_{i<=t} phi(q_t).phi(k_i).
#include <torch/nn/modules/linear.h>

#include "seqmix/ops/impl.h"
#include "seqmix/layers/prior_mixer.h"
#include "seqmix/modules/feature_map.h"
#include "seqmix/layers/mixer_spec.h"

namespace seqmix {

// value projection -> the linear prior's read (src/layers/priors/linear.cpp) -> output projection.
struct LinearAttentionOptions : PriorMixerOptions {
  FeatureMap feature = FeatureMap::Relu;  // must be positive
  double eps = 1e-6;                      // feature offset and normaliser floor
  bool causal = true;
};

class LinearAttentionImpl : public PriorMixerImpl {
 public:
  explicit LinearAttentionImpl(const LinearAttentionOptions& options);

 private:
  LinearAttentionOptions options_;
};

// The mixer's declaration for the registry (options, defaults, checks): beside the layer, in its .cpp.
const MixerDeclaration& linear_mixer_declaration();

}  // namespace seqmix
