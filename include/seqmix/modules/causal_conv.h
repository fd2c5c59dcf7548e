#pragma once
// Short causal depthwise convolution over time: y_t[c] = sum_{j<K} w[c,j] x_{t-K+1+j}[c] (zeros before t=0).
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace seqmix {

class CausalDepthwiseConvImpl : public torch::nn::Module {
 public:
  CausalDepthwiseConvImpl(int64_t channels, int64_t kernel_size, double init_std = 0.02);
  // x [B,T,C] -> [B,T,C]
  torch::Tensor forward(const torch::Tensor& x);
  // Decode: x_t [B,C]; window [B,K-1,C] holds the previous K-1 inputs and is shifted in place.
  torch::Tensor step(const torch::Tensor& x_t, torch::Tensor& window);
  torch::Tensor initial_window(int64_t batch) const;  // zeros [B,K-1,C]
  int64_t kernel_size() const { return kernel_size_; }
  torch::Tensor weight;  // [C,K]

 private:
  int64_t channels_, kernel_size_;
};
TORCH_MODULE(CausalDepthwiseConv);

}  // namespace seqmix
