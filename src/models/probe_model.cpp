#include "seqmix/models/probe_model.h"

#include <torch/torch.h>

namespace seqmix {

ProbeModelImpl::ProbeModelImpl(Mixer mixer) : mixer_(register_module("mixer", std::move(mixer))) {}

torch::Tensor ProbeModelImpl::forward(const torch::Tensor& inputs) {
  return mixer_->forward(inputs).select(1, inputs.size(1) - 1);
}

std::vector<c10::SymInt> ProbeModelImpl::output_shape(c10::SymIntArrayRef inputs) const {
  return {inputs[0], inputs[2]};  // [B,D]: the last position
}

}  // namespace seqmix
