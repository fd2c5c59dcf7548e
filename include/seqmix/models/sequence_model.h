#pragma once
// What the trainer needs of a model: inputs -> outputs, and its size.
#include <torch/nn/module.h>

#include <memory>

namespace seqmix {

class SequenceModelImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& inputs) = 0;
  // A loss term the last forward adds to the training objective (e.g. MoE load balance); undefined if none.
  virtual torch::Tensor auxiliary_loss() const { return {}; }
  int64_t parameter_count() const;
};
using SequenceModel = std::shared_ptr<SequenceModelImpl>;

}  // namespace seqmix
