#pragma once
// Rotary position embedding as a true rotation: channel i is paired with channel i + d/2 ("half split")
// and the pair is rotated by angle pos * theta^(-2i/d). Norms are preserved and q_s . k_t depends on s - t only.
#include <ATen/core/Tensor.h>

namespace seqmix {

// x [B,T,H,d] (d even) at absolute positions offset .. offset+T-1.
at::Tensor apply_rotary(const at::Tensor& x, int64_t offset, double theta = 10000.0);
// x [B,T,H,d] at per-token positions [B,T] (int64), e.g. counting real tokens only under padding.
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& positions, double theta = 10000.0);

}  // namespace seqmix
