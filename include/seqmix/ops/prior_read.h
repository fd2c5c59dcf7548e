#pragma once
// A linear prior's read before normalisation: numerator = sum_i w_ti v_i and normaliser = sum_i w_ti,
// both from the same scan, so E_p[v] = numerator / normaliser exactly.
#include <ATen/core/Tensor.h>

#include "seqmix/ops/operators.h"

namespace seqmix::ops {

// The normaliser floor of the priors FEM reads through: far below any real normaliser (ReLU+eps features
// give >= t*dk*eps^2), so the read is exactly numerator / normaliser; only an empty support (left padding)
// meets it, and reads 0.
constexpr double kPriorNormaliserFloor = 1e-30;

struct PriorRead {
  at::Tensor numerator;   // [B,T,H,dv] (per-head priors) or [B,T,C] (per-channel priors)
  at::Tensor normaliser;  // [B,T,H] (per head, broadcast over dv) or [B,T,C] (per channel)
};

}  // namespace seqmix::ops
