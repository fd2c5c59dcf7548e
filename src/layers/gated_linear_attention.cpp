#include "seqmix/layers/gated_linear_attention.h"

#include "seqmix/layers/mixer_spec.h"
#include "seqmix/ops/gla.h"

#include <torch/torch.h>

#include "priors/decayed_linear.h"
#include "seqmix/io/error.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"

namespace seqmix {

GatedLinearAttentionImpl::GatedLinearAttentionImpl(const GatedLinearAttentionOptions& options)
    : PriorMixerImpl("gla", options, /*causal=*/true), options_(options) {
  if (options.normalize && !is_positive(options.feature))
    throw Error("mixer gla: normalize=1 needs a positive feature map (relu or elu)");
  if (options.gate_normalizer <= 0) throw Error("mixer gla: gate_normalizer must be positive");
  PriorConfig c;
  c.own = DecayOptions{options.gate_normalizer, options.per_key};
  c.eps = options.eps;
  c.feature = options.feature;
  c.floor = options.eps;
  c.normalize = options.normalize;
  create("gla", c);
}

namespace {
}  // namespace

const MixerDeclaration& gla_mixer_declaration() {
  using O = GatedLinearAttentionOptions;
  static const MixerDeclaration declaration =
      MixerDeclarationOf<O>{
          .name = "gla",
          .meaning = "gated linear attention with a data-dependent decay per head or per key feature (causal)",
          .fields = {Field<O>::integer("heads", &O::heads, "number of heads (must divide the width)", 1),
                     Field<O>::choice("feature", &O::feature,
                                      {{"relu", FeatureMap::Relu}, {"elu", FeatureMap::Elu},
                                       {"identity", FeatureMap::Identity}},
                                      "feature map on q and k (identity only with normalize=0)"),
                     Field<O>::flag("normalize", &O::normalize, "divide by the decayed normaliser (a decayed average)"),
                     Field<O>::real("gate_normalizer", &O::gate_normalizer, "divides the log decay logsigmoid(w.x+b)",
                                    1e-6),
                     Field<O>::flag("per_key", &O::per_key,
                                    "a decay per key feature [B,T,H,dk] (the GLA paper's gates), not per head"),
                     Field<O>::real("eps", &O::eps, "feature offset and normaliser floor", 0.0),
                     Field<O>::flag("rope", &O::rope, "rotary position embedding on q and k"),
                     Field<O>::real("rope_theta", &O::rope_theta, "RoPE base", 1.0),
                     Field<O>::flag("bias", &O::bias, "biases in the q/k/v and output projections"),
                     Field<O>::impl(&O::impl, ops::kGlaImpls, "fused kernel or its naive (materialised) twin")},
          .make = make_layer<GatedLinearAttentionImpl, O>}
          .erase();
  return declaration;
}

}  // namespace seqmix
