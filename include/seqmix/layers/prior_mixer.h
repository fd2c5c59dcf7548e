#pragma once
// A baseline mixer on a selection prior (src/layers/priors/): value projection -> the prior's read -> output
// projection. The linear, gla and delta mixers are this with their prior's settings; the prior's packed qkv
// Linear (q | k | value projection) and its other Linears are registered in the mixer.
#include <torch/nn/modules/linear.h>

#include <memory>
#include <string>

#include "seqmix/layers/mixer.h"

namespace seqmix {

class PriorImpl;
struct PriorConfig;

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
  PriorMixerImpl(const std::string& kind, int64_t dim, bool causal, int64_t heads, bool rope);
  // The prior `prior` from `config` (its width, heads, head widths and packed layout are filled in here), then the
  // output projection: the order in which the parameters draw from the generator.
  void create(const std::string& prior, PriorConfig config, bool bias);

  int64_t heads_, head_dim_;

 private:
  std::shared_ptr<PriorImpl> prior_;
};

}  // namespace seqmix
