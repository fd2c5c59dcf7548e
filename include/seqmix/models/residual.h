#pragma once
// Residual schemes: how a stack threads its hidden state through the sublayers. Each sublayer is
// given as a function (its norm included) so one scheme serves the full forward and token-by-token
// decoding alike.
#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <vector>

namespace seqmix {

using Sublayer = std::function<torch::Tensor(const torch::Tensor&)>;  // [B,T,D] -> [B,T,D]

struct BlockSublayers {
  Sublayer mixer;
  Sublayer channel;  // empty when the block has no channel mixer
};

class ResidualSchemeImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x, const std::vector<BlockSublayers>& blocks) = 0;
};
using ResidualScheme = std::shared_ptr<ResidualSchemeImpl>;

// The standard pre-norm residual: x <- x + f(x) for every sublayer f in order.
class PreNormResidualImpl : public ResidualSchemeImpl {
 public:
  torch::Tensor forward(const torch::Tensor& x, const std::vector<BlockSublayers>& blocks) override;
};

}  // namespace seqmix
