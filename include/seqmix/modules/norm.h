#pragma once
// Normalisation layers over the last dimension: RMSNorm and LayerNorm behind one interface.
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <string>

namespace seqmix {

class NormImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
};
using Norm = std::shared_ptr<NormImpl>;

// x / sqrt(mean(x^2) + eps) * weight
class RMSNormImpl : public NormImpl {
 public:
  RMSNormImpl(int64_t dim, double eps = 1e-5);
  torch::Tensor forward(const torch::Tensor& x) override;
  torch::Tensor weight;
  double eps;
};

// (x - mean) / sqrt(var + eps) * weight + bias
class LayerNormImpl : public NormImpl {
 public:
  LayerNormImpl(int64_t dim, double eps = 1e-5);
  torch::Tensor forward(const torch::Tensor& x) override;
  torch::Tensor weight, bias;
  double eps;
};

// "rms" or "layer".
Norm make_norm(const std::string& kind, int64_t dim);

}  // namespace seqmix
