#include "seqmix/models/vit.h"

#include <torch/torch.h>

#include "seqmix/io/error.h"
#include "seqmix/modules/init.h"

namespace seqmix {

VitImpl::VitImpl(LanguageModelOptions s, int64_t classes) : options_(std::move(s)) {
  LanguageModelOptions& o = options_;
  if (o.input_features < 1 || o.max_len < 1 || classes < 2)
    throw Error("model vit classifies images: it needs an image task (e.g. fashion_mnist: patches of pixels, 10 classes)");
  o.vocab_size = 0;
  o.output_features = 0;
  o.output_head = false;
  o.position = "learned";
  stack_ = register_module("stack", std::make_shared<LanguageModelImpl>(o));
  for (size_t layer = 0; layer < stack_->blocks().size(); ++layer)
    if (stack_->blocks()[layer]->mixer->is_causal())
      throw Error("model vit is an encoder: the mixer of block " + std::to_string(layer) + " reads causally; give " +
                  "it causal=0 (e.g. softmax:causal=0), or choose a mixer with a bidirectional mode (softmax, relu, "
                  "linear, ela, fem with the softmax or linear prior, mha2nd1st, light2nd1st)");
  head_ = register_module("head", torch::nn::Linear(o.dim, classes));
  init_linear(head_);
}

torch::Tensor VitImpl::forward(const torch::Tensor& inputs) {
  TORCH_CHECK(inputs.dim() == 3 && inputs.size(1) == options_.max_len && inputs.size(2) == options_.input_features,
              "model vit: inputs must be patches [B, ", options_.max_len, ", ", options_.input_features, "] (got ",
              inputs.sizes(), ")");
  return head_(stack_->forward(inputs).mean(1));  // [B,T,D] -> mean over the patches [B,D] -> [B,classes]
}

std::vector<c10::SymInt> VitImpl::output_shape(c10::SymIntArrayRef inputs) const {
  return {inputs[0], c10::SymInt(head_->options.out_features())};  // [B,classes]
}

}  // namespace seqmix
