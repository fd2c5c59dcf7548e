#pragma once
// Head split and merge on the last dimension: head h owns the contiguous channels [h*d, (h+1)*d).
#include <ATen/core/Tensor.h>

namespace seqmix {

// [..., H*d] -> [..., H, d]
at::Tensor split_heads(const at::Tensor& x, int64_t heads);
// [..., H, d] -> [..., H*d]
at::Tensor merge_heads(const at::Tensor& x);

}  // namespace seqmix
