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

// The delta rule continued from `initial` (linear attention's state layout; undefined = zeros) and, when
// `final_state`, the state after position T: exact, by the error-correction form S_t = S_{t-1} + b_t k_t (v_t -
// S_{t-1}^T k_t)^T. From S_0 the written values are those of a zero start on v_t - S_0^T k_t, so the read is
// q_t^T S_0 plus the zero-start read of those values (and of 1 - z_0 . k_t for the normaliser); the final
// state is read by d_k positions after T that do not write (b = 0, k = 0) with queries e_1..e_dk
// (src/ops/delta/state.cpp).
ReadWithState delta_rule_from_state(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                                    const LinearAttentionState& initial, bool final_state, Impl impl);

namespace native {
// What the operators run: the naive form through causal_outputs, and the recurrent step on linear attention's state
// layout (kv = S [B,H,dk,dv], k_sum = z [B,H,dk]; beta_t [B,H]; numerator [B,1,H,dv] and normaliser [B,1,H]).
PriorRead delta_rule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta, Impl impl);
PriorRead delta_rule_step(const at::Tensor& q_t, const at::Tensor& k_t, const at::Tensor& v_t, const at::Tensor& beta_t,
                          LinearAttentionState& state);
}  // namespace native

}  // namespace seqmix::ops
