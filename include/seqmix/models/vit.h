#pragma once
// A ViT-style image classifier (Dosovitskiy et al. 2021) on the block stack: each patch is a token (its pixels
// projected to the model width), learned absolute positions, N blocks of [norm, bidirectional sequence mixer,
// norm, channel mixer], the final norm, the mean over the patches, and a Linear head to the class logits.
// Every mixer must read in both directions (encoder mode, causal=0); a causal one is an error, not a silent change.
#include <torch/nn/modules/linear.h>

#include <memory>

#include "seqmix/models/language_model.h"

namespace seqmix {

class VitImpl : public SequenceModelImpl {
 public:
  // stack: input_features = pixels per patch, max_len = patches; classes = the task's output_features.
  VitImpl(LanguageModelOptions stack, int64_t classes);
  torch::Tensor forward(const torch::Tensor& inputs) override;  // [B,patches,pixels] -> logits [B,classes]
  std::vector<c10::SymInt> output_shape(c10::SymIntArrayRef inputs) const override;
  torch::Tensor auxiliary_loss() const override { return stack_->auxiliary_loss(); }

 private:
  LanguageModelOptions options_;
  std::shared_ptr<LanguageModelImpl> stack_;
  torch::nn::Linear head_{nullptr};  // [D] -> [classes]
};

}  // namespace seqmix
