#include "seqmix/models/sequence_model.h"

#include <torch/torch.h>

#include "seqmix/io/error.h"

namespace seqmix {

torch::Tensor SequenceModelImpl::forward_packed(const torch::Tensor&, const torch::Tensor&) {
  throw Error("model: this model does not take packed sequences (a task's pack=1); the language model (lm) does");
}

torch::Tensor SequenceModelImpl::run(const torch::Tensor& inputs, const torch::Tensor& sequence_starts) {
  return sequence_starts.defined() ? forward_packed(inputs, sequence_starts) : forward(inputs);
}

int64_t SequenceModelImpl::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

}  // namespace seqmix
