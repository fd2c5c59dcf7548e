#include "seqmix/layers/linear_attention.h"

#include "seqmix/layers/mixer_spec.h"
#include "seqmix/ops/linear_attention.h"

#include <torch/torch.h>

#include "priors/prior.h"
#include "seqmix/io/error.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"

namespace seqmix {

LinearAttentionImpl::LinearAttentionImpl(const LinearAttentionOptions& options)
    : PriorMixerImpl("linear", options, options.causal), options_(options) {
  if (!is_positive(options.feature))
    throw Error("mixer linear: a normalised read needs a positive feature map (relu or elu)");
  PriorConfig c;
  c.eps = options.eps;
  c.feature = options.feature;
  c.floor = options.eps;
  create("linear", c);
}

namespace {
}  // namespace

const MixerDeclaration& linear_mixer_declaration() {
  using O = LinearAttentionOptions;
  static const MixerDeclaration declaration =
      MixerDeclarationOf<O>{
          .name = "linear",
          .meaning = "normalised linear attention with a positive feature map",
          .fields = {Field<O>::integer("heads", &O::heads, "number of heads (must divide the width)", 1),
                     Field<O>::choice("feature", &O::feature, {{"relu", FeatureMap::Relu}, {"elu", FeatureMap::Elu}},
                                      "feature map: ReLU(x)+eps or ELU(x)+1"),
                     Field<O>::real("eps", &O::eps, "feature offset and normaliser floor", 0.0),
                     Field<O>::flag("rope", &O::rope, "rotary position embedding on q and k before the feature map"),
                     Field<O>::real("rope_theta", &O::rope_theta, "RoPE base", 1.0),
                     Field<O>::flag("bias", &O::bias, "biases in the projections"),
                     Field<O>::flag("causal", &O::causal, "causal (decoder) or bidirectional (encoder)"),
                     Field<O>::impl(&O::impl, ops::kLinearAttentionImpls,
                                    "fused kernel or its naive (materialised) twin")},
          .make = make_layer<LinearAttentionImpl, O>}
          .erase();
  return declaration;
}

}  // namespace seqmix
