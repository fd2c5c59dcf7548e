#pragma once
// A single sequence mixer applied to the raw inputs [B,T,D] and read at the last position: [B,D].
// No embedding, norm or channel mixer, and the mixer's values are the inputs themselves with no output
// projection (MixerContext::raw_values): a pure value mixer, the FEM paper's single-layer argmax toy.
#include "seqmix/layers/mixer.h"
#include "seqmix/models/sequence_model.h"

namespace seqmix {

class ProbeModelImpl : public SequenceModelImpl {
 public:
  explicit ProbeModelImpl(Mixer mixer);
  torch::Tensor forward(const torch::Tensor& inputs) override;
  std::vector<c10::SymInt> output_shape(c10::SymIntArrayRef inputs) const override;
  const Mixer& mixer() const { return mixer_; }

 private:
  Mixer mixer_;
};

}  // namespace seqmix
