#include "seqmix/modules/channel_mixer.h"

#include <torch/torch.h>

#include "seqmix/modules/init.h"

namespace seqmix {

MLPImpl::MLPImpl(int64_t dim, int64_t hidden, bool bias) {
  fc1 = register_module("fc1", torch::nn::Linear(torch::nn::LinearOptions(dim, hidden).bias(bias)));
  fc2 = register_module("fc2", torch::nn::Linear(torch::nn::LinearOptions(hidden, dim).bias(bias)));
  init_linear(fc1);
  init_linear(fc2);
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) { return fc2(torch::gelu(fc1(x))); }

SwiGLUImpl::SwiGLUImpl(int64_t dim, int64_t hidden) {
  w1 = register_module("w1", torch::nn::Linear(torch::nn::LinearOptions(dim, hidden).bias(false)));
  w2 = register_module("w2", torch::nn::Linear(torch::nn::LinearOptions(dim, hidden).bias(false)));
  w3 = register_module("w3", torch::nn::Linear(torch::nn::LinearOptions(hidden, dim).bias(false)));
  init_linear(w1);
  init_linear(w2);
  init_linear(w3);
}

torch::Tensor SwiGLUImpl::forward(const torch::Tensor& x) { return w3(torch::silu(w1(x)) * w2(x)); }

int64_t swiglu_default_hidden(int64_t dim) {
  const int64_t raw = (8 * dim + 2) / 3;
  return (raw + 15) / 16 * 16;
}

}  // namespace seqmix
