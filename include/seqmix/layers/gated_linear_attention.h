#pragma once
// Multi-head gated linear attention with a data-dependent decay per head (or, per_key=1, per key feature):
// log decay a_t = logsigmoid(w_h . x_t + b_h) / gate_normalizer; S_t = diag(e^{a_t}) S_{t-1} + phi(k_t) (x) v_t.
// normalize=1 reads S_t / z_t (a decayed average, positive features required); normalize=0 reads
// q_t S_t with q scaled by 1/sqrt(head width).
#include <torch/nn/modules/linear.h>

#include "seqmix/ops/impl.h"
#include "seqmix/layers/prior_mixer.h"
#include "seqmix/modules/feature_map.h"
#include "seqmix/layers/mixer_spec.h"

namespace seqmix {

// value projection -> the gla prior's read (src/layers/priors/gla.cpp) -> output projection.
struct GatedLinearAttentionOptions : PriorMixerOptions {
  FeatureMap feature = FeatureMap::Relu;
  bool normalize = true;
  double gate_normalizer = 16.0;  // divides the log decay: at init the decay is sigmoid(0)^(1/16) ~ 0.96
  bool per_key = false;           // a decay per key feature (the GLA paper's gates [B,T,H,dk]), else per head
  double eps = 1e-6;
};

class GatedLinearAttentionImpl : public PriorMixerImpl {
 public:
  explicit GatedLinearAttentionImpl(const GatedLinearAttentionOptions& options);

 private:
  GatedLinearAttentionOptions options_;
};

// The mixer's declaration for the registry (options, defaults, checks): beside the layer, in its .cpp.
const MixerDeclaration& gla_mixer_declaration();

}  // namespace seqmix
