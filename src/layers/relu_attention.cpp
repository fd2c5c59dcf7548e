#include "seqmix/layers/relu_attention.h"

#include "kv_attention_fields.h"

#include <torch/torch.h>

#include "seqmix/ops/attention.h"

namespace seqmix {

ReluAttentionImpl::ReluAttentionImpl(const ReluAttentionOptions& options)
    : KVAttentionImpl("relu", options), eps_(options.eps) {}

torch::Tensor ReluAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, bool causal) {
  return ops::relu_attention(q, k, v, {.causal = causal, .eps = eps_});
}

namespace {
}  // namespace

const MixerDeclaration& relu_mixer_declaration() {
  using O = ReluAttentionOptions;
  static const MixerDeclaration declaration =
      MixerDeclarationOf<O>{
          .name = "relu",
          .meaning = "ReLU attention: ReLU(L2Norm(q K^T)) V per head (HyperMLP's R)",
          .fields = kv_attention_fields<O>(
              {Field<O>::real("eps", &O::eps, "added under the square root of the score-row norm", 0.0)}),
          .make = make_layer<ReluAttentionImpl, O>}
          .erase();
  return declaration;
}

}  // namespace seqmix
