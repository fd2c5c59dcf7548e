#pragma once
// The delta rule (DeltaNet): a linear-attention state written by error correction instead of accumulation,
//   S_t = (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T,      numerator_t = q_t^T S_t,
//   z_t = (I - b_t k_t k_t^T) z_{t-1} + b_t k_t,            normaliser_t = q_t . z_t,
// with S [dk,dv] per head (the layout of linear attention's kv) and z [dk] the same recurrence on a value of
// ones. q, k [B,T,H,dk], v [B,T,H,dv], beta [B,T,H]. Always causal. The layers feed L2-normalised keys and
// beta in (0, 1), so every I - b k k^T has eigenvalues in [1 - b, 1]: the state never grows. The implied
// weights w_ti = q_t^T (prod_{j=i+1..t} (I - b_j k_j k_j^T)) b_i k_i are signed (README.md).
#include <ATen/core/Tensor.h>

#include "seqmix/ops/impl.h"
#include "seqmix/ops/operators.h"
#include "seqmix/ops/linear_attention.h"
#include "seqmix/ops/prior_read.h"

namespace seqmix::ops {

// Parallel form (README.md): with A = I + strictly_lower(diag(b) K K^T) [B,H,T,T], the written values are
// U = A^{-1} diag(b) V (one unit-triangular solve), and numerator = tril(Q K^T) U; the normaliser is the same
// read of ones. O(T^2) memory per head; autograd through ATen.
PriorRead delta_rule_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta);

// The implementations of torch.ops.seqmix.delta_rule, whose C++ entry points ops::delta_rule and
// ops::delta_rule_step (operators.h) are generated from their schemas: in reduced precision it computes in float32,
// as every operator does (ATen's triangular solve has no bfloat16 kernel). The delta rule has its naive (parallel)
// form only; decoding uses delta_rule_step.
constexpr ImplSet kDeltaRuleImpls{Impl::naive};

}  // namespace seqmix::ops
