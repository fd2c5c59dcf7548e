#pragma once
// Channel mixers (position-wise feed-forward layers): GELU MLP and SwiGLU behind one interface.
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <memory>

namespace seqmix {

class ChannelMixerImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;  // [..., D] -> [..., D]
  // A loss term the last forward adds to the training objective (MoE load balance); undefined if none.
  virtual torch::Tensor auxiliary_loss() const { return {}; }
};
using ChannelMixer = std::shared_ptr<ChannelMixerImpl>;

// W2 GELU(W1 x) (exact GELU).
class MLPImpl : public ChannelMixerImpl {
 public:
  MLPImpl(int64_t dim, int64_t hidden, bool bias);
  torch::Tensor forward(const torch::Tensor& x) override;
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

// W3 (SiLU(W1 x) * W2 x), no biases.
class SwiGLUImpl : public ChannelMixerImpl {
 public:
  SwiGLUImpl(int64_t dim, int64_t hidden);
  torch::Tensor forward(const torch::Tensor& x) override;
  torch::nn::Linear w1{nullptr}, w2{nullptr}, w3{nullptr};
};

// The channel mixers' options (the registry's declarations bind them to their spec options).
struct MLPOptions {
  int64_t hidden = 0;  // 0: 4 x width
  bool bias = true;
};
struct SwiGLUOptions {
  int64_t hidden = 0;  // 0: swiglu_default_hidden(width)
};

// SwiGLU's usual hidden width: 8/3 * dim rounded up to a multiple of 16 (352 for dim 128, as in MAD).
int64_t swiglu_default_hidden(int64_t dim);

}  // namespace seqmix
