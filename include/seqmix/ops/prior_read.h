#pragma once
// A linear prior's read before normalisation: numerator = sum_i w_ti v_i and normaliser = sum_i w_ti,
// both from the same scan, so E_p[v] = numerator / normaliser exactly.
#include <ATen/core/Tensor.h>

namespace seqmix::ops {

struct PriorRead {
  at::Tensor numerator;   // [B,T,H,dv]
  at::Tensor normaliser;  // [B,T,H]
};

// numerator / max(normaliser, eps), broadcast over the value channels: [B,T,H,dv].
at::Tensor normalised_read(const PriorRead& read, double eps);

}  // namespace seqmix::ops
