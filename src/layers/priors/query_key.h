#pragma once
// The query/key projection the softmax, linear and gla priors share: its Linears in either layout
// (QueryKeyLayout), modulation added before RoPE, RoPE by offset or per-token positions.
#include <torch/nn/modules/linear.h>

#include "prior.h"

namespace seqmix {

class QueryKeyProjection {
 public:
  // Registers the Linears in `home` (the prior's module for separate, the mixer for packed). Separate Linears are
  // initialised as they are made; packed ones when the mixer calls init_parameters(), so the mixer keeps the order
  // in which its parameters draw from the generator.
  void create(torch::nn::Module& home, const PriorConfig& c);
  void init_parameters();
  // q, k [B,T,H,dk] (modulated, then rotated) and, packed, the values [B,T,H,dv] (the inputs with raw_values).
  struct Projected {
    at::Tensor q, k, values;
  };
  Projected project(const PriorConfig& c, const at::Tensor& x, const at::Tensor& modulation,
                    const Positions& positions);
  // The options of the projection's weights (for states of the same dtype and device).
  at::TensorOptions options() const;

 private:
  torch::nn::Linear query{nullptr}, key{nullptr}, qkv{nullptr};
};

// Modulation slice [from, from + width) of the conditioner output, or undefined.
at::Tensor modulation_slice(const at::Tensor& modulation, int64_t from, int64_t width);
// pre + modulation, when there is one (FEM paper H.5: theta~ = theta + G(c)).
at::Tensor plus_modulation(const at::Tensor& pre, const at::Tensor& modulation);
// A Linear registered in `home` as `name` and initialised (init_linear).
torch::nn::Linear make_linear(torch::nn::Module& home, const std::string& name, int64_t in, int64_t out, bool bias);

}  // namespace seqmix
