#pragma once
// MAD's compression backbone (specs/mad.md 2.5): token embedding and the block stack encode the
// sequence; the hidden state at the last position (after the last block, no final norm) plus a fixed
// sinusoidal position vector is decoded per position by RMSNorm-Linear-GELU-RMSNorm-Linear-GELU and an
// RMSNorm-Linear head. Every Linear N(0, 0.02), biases 0.
#include <torch/nn/modules/linear.h>

#include "seqmix/models/language_model.h"

namespace seqmix {

class AutoEncoderImpl : public SequenceModelImpl {
 public:
  // options describe the encoder stack (vocab, dim, layers, mixers, ...); seq_len outputs are decoded.
  AutoEncoderImpl(LanguageModelOptions options, int64_t seq_len);
  torch::Tensor forward(const torch::Tensor& tokens) override;  // [B,L] -> logits [B,L,V]
  std::vector<c10::SymInt> output_shape(c10::SymIntArrayRef inputs) const override;
  // The encoder stack's auxiliary losses (MoE channel mixers).
  torch::Tensor auxiliary_loss() const override { return encoder_->auxiliary_loss(); }

  // [L,d] half sines, half cosines, frequencies exp(-j ln(10000) / (d/2 - 1)).
  static torch::Tensor sinusoidal_positions(int64_t length, int64_t dim);

 private:
  int64_t seq_len_;
  std::shared_ptr<LanguageModelImpl> encoder_;
  Norm norm1_, norm2_, head_norm_;
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr}, head_{nullptr};
  torch::Tensor positions_;
};

}  // namespace seqmix
