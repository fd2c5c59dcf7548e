#include "seqmix/modules/feature_map.h"

#include <ATen/ATen.h>


namespace seqmix {

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
