#include "seqmix/layers/delta_rule.h"

#include <torch/torch.h>

#include "priors/prior.h"
#include "seqmix/io/error.h"
#include "seqmix/layers/mixer_spec.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"
#include "seqmix/ops/delta.h"

namespace seqmix {

DeltaRuleImpl::DeltaRuleImpl(const DeltaRuleOptions& options)
    : PriorMixerImpl("delta", options, /*causal=*/true), options_(options) {
  PriorConfig c;
  c.normalize = false;  // DeltaNet's read: the numerator S^T q
  create("delta", c);
}

namespace {
}  // namespace

const MixerDeclaration& delta_mixer_declaration() {
  using O = DeltaRuleOptions;
  static const MixerDeclaration declaration =
      MixerDeclarationOf<O>{
          .name = "delta",
          .meaning = "the delta rule (DeltaNet): a fast-weight state corrected towards each value (causal)",
          .fields = {Field<O>::integer("heads", &O::heads, "number of heads (must divide the width)", 1),
                     Field<O>::flag("rope", &O::rope, "rotary position embedding on q and k"),
                     Field<O>::real("rope_theta", &O::rope_theta, "RoPE base", 1.0),
                     Field<O>::flag("bias", &O::bias, "biases in the q/k/v, write and output projections"),
                     Field<O>::impl(&O::impl, ops::kDeltaRuleImpls,
                                    "the parallel form (naive); decoding runs the recurrence")},
          .make = make_layer<DeltaRuleImpl, O>}
          .erase();
  return declaration;
}

}  // namespace seqmix
