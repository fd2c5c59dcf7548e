#pragma once
// The delta-rule mixer (DeltaNet): value projection -> the delta prior's read (src/layers/priors/delta.cpp)
// -> output projection. Per head, S_t = (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T with L2-normalised q and k
// and b_t = sigmoid(w . x_t + c); the read is S_t^T q_t / sqrt(head width) (no normalisation). Causal.
#include <torch/nn/modules/linear.h>

#include "seqmix/layers/prior_mixer.h"
#include "seqmix/ops/impl.h"
#include "seqmix/layers/mixer_spec.h"

namespace seqmix {

struct DeltaRuleOptions : PriorMixerOptions {};  // the delta rule has its parallel (naive) form only

class DeltaRuleImpl : public PriorMixerImpl {
 public:
  explicit DeltaRuleImpl(const DeltaRuleOptions& options);

 private:
  DeltaRuleOptions options_;
};

// The mixer's declaration for the registry (options, defaults, checks): beside the layer, in its .cpp.
const MixerDeclaration& delta_mixer_declaration();

}  // namespace seqmix
