#pragma once
// A baseline mixer on a selection prior (src/layers/priors/): value projection -> the prior's read -> output
// projection. The linear, gla and delta mixers are this with their prior's settings; the prior's packed qkv
// Linear (q | k | value projection) and its other Linears are registered in the mixer.
#include <torch/nn/modules/linear.h>

#include <memory>
#include <string>

#include "seqmix/layers/mixer.h"
#include "seqmix/ops/impl.h"

namespace seqmix {

class PriorImpl;
struct PriorConfig;

// What every mixer on a prior shares; its options struct derives from this and PriorMixerImpl::create hands these to
// the prior (the width, heads and head widths, RoPE, biases and the read's implementation), so no mixer copies them.
struct PriorMixerOptions {
  ops::Impl impl = ops::Impl::automatic;  // auto (per device), the fused kernel, or its naive twin
  int64_t dim = 128;
  int64_t heads = 4;
  bool rope = false;  // RoPE on q and k (before the feature map)
  double rope_theta = 10000.0;
  bool bias = true;
};

class PriorMixerImpl : public MixerImpl {
 public:
  torch::Tensor forward(const torch::Tensor& x) override;
  // One read for all sequences where the prior's op takes cu_seqlens (linear, gla), else a forward per sequence.
  torch::Tensor forward_packed(const torch::Tensor& x, const torch::Tensor& cu_seqlens) override;
  bool packs_natively() const override;
  DecodeState init_state(int64_t batch) const override;
  torch::Tensor step(const torch::Tensor& x_t, DecodeState& state) override;

  torch::nn::Linear out{nullptr};

 protected:
  // Checks that heads divide the width and, with rope, that the head width is even (the errors name the mixer).
  PriorMixerImpl(const std::string& kind, const PriorMixerOptions& shared, bool causal);
  // The prior `prior` from `config`, which holds the settings of this mixer's own (the shared ones, the packed
  // layout and the causal flag are filled in here), then the output projection: the order in which the parameters
  // draw from the generator.
  void create(const std::string& prior, PriorConfig config);

  int64_t heads_, head_dim_;

 private:
  PriorMixerOptions shared_;
  std::shared_ptr<PriorImpl> prior_;
};

}  // namespace seqmix
