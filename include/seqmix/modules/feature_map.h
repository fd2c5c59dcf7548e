#pragma once
// Feature maps for linear attention: "relu" = ReLU(x) + eps, "elu" = ELU(x) + 1 (both positive, so the
// read is a normalised average), "identity" = x (unnormalised reads only).
#include <ATen/core/Tensor.h>

#include <string>

namespace seqmix {

enum class FeatureMap { Relu, Elu, Identity };

at::Tensor apply_feature_map(const at::Tensor& x, FeatureMap map, double eps);
bool is_positive(FeatureMap map);

}  // namespace seqmix
