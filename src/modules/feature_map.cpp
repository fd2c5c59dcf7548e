#include "seqmix/modules/feature_map.h"

#include <ATen/ATen.h>

#include "seqmix/io/error.h"

namespace seqmix {

FeatureMap parse_feature_map(const std::string& name) {
  if (name == "relu") return FeatureMap::Relu;
  if (name == "elu") return FeatureMap::Elu;
  if (name == "identity") return FeatureMap::Identity;
  throw Error("unknown feature map '" + name + "'; valid feature maps: relu, elu, identity");
}

at::Tensor apply_feature_map(const at::Tensor& x, FeatureMap map, double eps) {
  switch (map) {
    case FeatureMap::Relu: return at::relu(x) + eps;
    case FeatureMap::Elu: return at::elu(x) + 1.0;
    case FeatureMap::Identity: return x;
  }
  return x;
}

bool is_positive(FeatureMap map) { return map != FeatureMap::Identity; }

}  // namespace seqmix
