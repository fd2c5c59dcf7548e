#include "seqmix/layers/softmax_attention.h"

#include "kv_attention_fields.h"

#include <cmath>

#include <torch/torch.h>

#include "seqmix/ops/attention.h"

namespace seqmix {

SoftmaxAttentionImpl::SoftmaxAttentionImpl(const SoftmaxAttentionOptions& options)
    : KVAttentionImpl("softmax", options),
      scale_(options.scale > 0 ? options.scale
                               : 1.0 / std::sqrt(static_cast<double>(options.dim / options.heads))),
      impl_(options.impl) {}

torch::Tensor SoftmaxAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k,
                                           const torch::Tensor& v, bool causal) {
  return ops::attention(q, k, v, {.causal = causal, .scale = scale_, .impl = impl_});
}

torch::Tensor SoftmaxAttentionImpl::attend_packed(const torch::Tensor& q, const torch::Tensor& k,
                                                  const torch::Tensor& v, bool causal, const torch::Tensor& cu_seqlens) {
  return ops::attention(q, k, v, {.causal = causal, .scale = scale_, .impl = impl_, .cu_seqlens = cu_seqlens});
}

namespace {
}  // namespace

const MixerDeclaration& softmax_mixer_declaration() {
  using O = SoftmaxAttentionOptions;
  static const MixerDeclaration declaration =
      MixerDeclarationOf<O>{
          .name = "softmax",
          .meaning = "multi-head softmax attention (the S baseline)",
          .fields = kv_attention_fields<O>(
              {Field<O>::real("scale", &O::scale, "score scale; 0 means 1/sqrt(head width)", 0.0),
               Field<O>::impl(&O::impl, ops::kSoftmaxAttentionImpls,
                              "fused kernel, its naive (materialised) twin, or torch's scaled_dot_product_attention")}),
          .make = make_layer<SoftmaxAttentionImpl, O>}
          .erase();
  return declaration;
}

}  // namespace seqmix
