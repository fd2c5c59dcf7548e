#pragma once
// What the trainer needs of a model: inputs -> outputs, and its size.
#include <c10/core/SymIntArrayRef.h>
#include <torch/nn/module.h>

#include <memory>
#include <vector>

namespace seqmix {

class SequenceModelImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& inputs) = 0;
  // The shape forward returns for inputs of shape `inputs`, without running it: torch.compile's fake kernel asks,
  // with symbolic sizes (src/python/modules.cpp). forward_packed returns the same shape.
  virtual std::vector<c10::SymInt> output_shape(c10::SymIntArrayRef inputs) const = 0;
  // Packed rows: inputs [B,T,...] whose sequence_starts [B,T] (bool) marks the first token of each packed sequence
  // (every row's first token begins one too); each sequence is modelled as if it were alone. The default refuses.
  virtual torch::Tensor forward_packed(const torch::Tensor& inputs, const torch::Tensor& sequence_starts);
  // forward, or forward_packed when sequence_starts is defined (a task's packed batch).
  torch::Tensor run(const torch::Tensor& inputs, const torch::Tensor& sequence_starts);
  // A loss term the last forward adds to the training objective (e.g. MoE load balance); undefined if none.
  virtual torch::Tensor auxiliary_loss() const { return {}; }
  int64_t parameter_count() const;
};
using SequenceModel = std::shared_ptr<SequenceModelImpl>;

}  // namespace seqmix
