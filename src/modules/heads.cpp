#include "seqmix/modules/heads.h"

#include <ATen/ATen.h>

namespace seqmix {

at::Tensor split_heads(const at::Tensor& x, int64_t heads) {
  TORCH_CHECK(x.size(-1) % heads == 0, "split_heads: width ", x.size(-1), " is not divisible by ", heads,
              " heads");
  auto sizes = x.sizes().vec();
  sizes.back() = heads;
  sizes.push_back(x.size(-1) / heads);
  return x.reshape(sizes);
}

at::Tensor merge_heads(const at::Tensor& x) { return x.flatten(-2); }

}  // namespace seqmix
