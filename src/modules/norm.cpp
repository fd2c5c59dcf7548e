#include "seqmix/modules/norm.h"

#include <torch/torch.h>

#include "seqmix/io/error.h"

namespace seqmix {

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  // The statistic in float32 at least, the result in x's dtype: in float16 a residual stream at initialisation
  // (entries ~0.02, mean(x^2) ~ 4e-4) makes the backward's mean^(-3/2) ~ 1e5, beyond float16's 65504.
  const auto wide = x.to(torch::promote_types(x.scalar_type(), torch::kFloat));
  return (wide * torch::rsqrt(wide.square().mean(-1, /*keepdim=*/true) + eps)).to(x.scalar_type()) * weight;
}

LayerNormImpl::LayerNormImpl(int64_t dim, double eps) : eps(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
  bias = register_parameter("bias", torch::zeros({dim}));
}

torch::Tensor LayerNormImpl::forward(const torch::Tensor& x) {
  return torch::layer_norm(x, {x.size(-1)}, weight, bias, eps);
}

Norm make_norm(const std::string& kind, int64_t dim) {
  if (kind == "rms") return std::make_shared<RMSNormImpl>(dim);
  if (kind == "layer") return std::make_shared<LayerNormImpl>(dim);
  throw Error("unknown norm '" + kind + "'; valid norms: rms, layer");
}

}  // namespace seqmix
