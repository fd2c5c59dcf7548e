#pragma once
// A forecaster built on the GPT-style stack: each time step of the window is a token (its C values
// projected to the model width), the blocks mix over time with the chosen sequence mixers, and a Linear
// head maps the final hidden state at the last position to all horizon x C forecasts at once.
// Instance normalisation (RevIN without its affine part, Kim et al. 2022): every window is normalised
// per channel by its own mean and standard deviation sqrt(var + eps) before the stack, and the forecast
// is mapped back with the same statistics, so the model sees level- and scale-free windows and a shift
// of the inputs by c shifts the forecast by exactly c.
#include <torch/nn/modules/linear.h>

#include <memory>

#include "seqmix/models/language_model.h"

namespace seqmix {

struct ForecasterOptions {
  LanguageModelOptions stack;  // input_features = C, output_head = false, max_len = input_len
  int64_t horizon = 96;
  bool instance_norm = true;
  double eps = 1e-5;  // under the square root of each window's per-channel variance (RevIN's)
};

class ForecasterImpl : public SequenceModelImpl {
 public:
  explicit ForecasterImpl(ForecasterOptions options);
  torch::Tensor forward(const torch::Tensor& inputs) override;  // [B,input_len,C] -> [B,horizon,C]
  std::vector<c10::SymInt> output_shape(c10::SymIntArrayRef inputs) const override;
  torch::Tensor auxiliary_loss() const override { return stack_->auxiliary_loss(); }
  const LanguageModelImpl& stack() const { return *stack_; }

 private:
  ForecasterOptions options_;
  std::shared_ptr<LanguageModelImpl> stack_;
  torch::nn::Linear head_{nullptr};  // [D] -> [horizon * C]
};

}  // namespace seqmix
