#include "seqmix/models/forecaster.h"

#include <torch/torch.h>

#include "seqmix/io/error.h"
#include "seqmix/modules/init.h"

namespace seqmix {

ForecasterImpl::ForecasterImpl(ForecasterOptions o) : options_(std::move(o)) {
  LanguageModelOptions& s = options_.stack;
  if (s.input_features < 1 || s.max_len < 1 || options_.horizon < 1)
    throw Error("model forecaster: needs the input length, the horizon and the feature count");
  if (options_.eps <= 0) throw Error("model forecaster: eps must be positive");
  s.vocab_size = 0;
  s.output_features = 0;
  s.output_head = false;
  stack_ = register_module("stack", std::make_shared<LanguageModelImpl>(s));
  head_ = register_module("head", torch::nn::Linear(s.dim, options_.horizon * s.input_features));
  init_linear(head_);
}

torch::Tensor ForecasterImpl::forward(const torch::Tensor& inputs) {
  const int64_t L = options_.stack.max_len, C = options_.stack.input_features;
  TORCH_CHECK(inputs.dim() == 3 && inputs.size(1) == L && inputs.size(2) == C, "model forecaster: inputs must have shape [B, ",
              L, ", ", C, "] (got ", inputs.sizes(), ")");
  auto x = inputs;
  torch::Tensor mean, scale;  // [B,1,C]
  if (options_.instance_norm) {
    mean = inputs.mean(1, /*keepdim=*/true);
    scale = torch::sqrt(inputs.var(1, /*unbiased=*/false, /*keepdim=*/true) + options_.eps);
    x = (inputs - mean) / scale;
  }
  auto last = stack_->forward(x).select(1, L - 1);                      // [B,D]
  auto forecast = head_(last).view({inputs.size(0), options_.horizon, C});  // [B,horizon,C]
  return options_.instance_norm ? forecast * scale + mean : forecast;
}

std::vector<c10::SymInt> ForecasterImpl::output_shape(c10::SymIntArrayRef inputs) const {
  return {inputs[0], c10::SymInt(options_.horizon), inputs[2]};  // [B,horizon,C]
}

}  // namespace seqmix
