#pragma once
// Multi-head softmax attention (the "S" baseline): softmax(scale * q k^T) v per head.
#include "seqmix/ops/impl.h"
#include "seqmix/layers/kv_attention.h"
#include "seqmix/layers/mixer_spec.h"

namespace seqmix {

struct SoftmaxAttentionOptions : KVAttentionOptions {
  ops::Impl impl = ops::Impl::automatic;  // auto (per device), the fused kernel, its naive twin, or torch's SDPA
  double scale = 0.0;  // score scale; 0 means 1/sqrt(head width)
};

class SoftmaxAttentionImpl : public KVAttentionImpl {
 public:
  explicit SoftmaxAttentionImpl(const SoftmaxAttentionOptions& options);
  double scale() const { return scale_; }
  bool packs_natively() const override { return true; }

 protected:
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       bool causal) override;
  torch::Tensor attend_packed(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                              const torch::Tensor& cu_seqlens) override;

 private:
  double scale_;
  ops::Impl impl_;
};

// The mixer's declaration for the registry (options, defaults, checks): beside the layer, in its .cpp.
const MixerDeclaration& softmax_mixer_declaration();

}  // namespace seqmix
