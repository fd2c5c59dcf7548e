// Finite inputs at masked positions (padding.h).
#include "padding.h"

#include <ATen/ATen.h>

#include <vector>

namespace seqmix::ops {

at::Tensor finite_padding(const char* op, const char* name, const at::Tensor& x, const at::Tensor& mask) {
  if (!mask.defined()) return x;
  TORCH_CHECK(mask.scalar_type() == at::kBool && mask.dim() == 2 && x.dim() >= 2 && mask.size(0) == x.size(0) &&
                  mask.size(1) == x.size(1),
              op, ": the mask must be bool [B,T] = [", x.dim() >= 2 ? x.size(0) : -1, ",",
              x.dim() >= 2 ? x.size(1) : -1, "] like ", name, "'s first two sizes (got ", mask.scalar_type(), " ",
              mask.sizes(), ")");
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[0] = mask.size(0);
  shape[1] = mask.size(1);
  return x.masked_fill(mask.logical_not().view(shape) & x.isfinite().logical_not(), 0);
}

AttentionInputs finite_masked_positions(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& key_mask) {
  if (!key_mask.defined()) return {q, k, v};
  const int64_t T = q.size(1), S = k.size(1);
  return {finite_padding(op, "q", q, key_mask.narrow(1, S - T, T)), finite_padding(op, "k", k, key_mask),
          finite_padding(op, "v", v, key_mask)};
}

}  // namespace seqmix::ops
