#pragma once
// Gated linear attention with a per-head, data-dependent scalar decay in log space:
//   S_t = exp(a_t) S_{t-1} + k_t (x) v_t,   z_t = exp(a_t) z_{t-1} + k_t,
//   numerator_t = q_t S_t,   normaliser_t = q_t . z_t,
// with log_decay a [B,T,H] <= 0. q, k [B,T,H,dk], v [B,T,H,dv]. Always causal.
#include <ATen/core/Tensor.h>

#include "seqmix/ops/impl.h"

#include "seqmix/ops/linear_attention.h"
#include "seqmix/ops/prior_read.h"

namespace seqmix::ops {

// Parallel form with the decay matrix exp(c_t - c_i), c = cumsum(a), for i <= t (every exponent <= 0,
// so it is stable for any length), materialised as [B,H,T,T].
PriorRead gla_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& log_decay);

// One decode step; the state has the layout of linear attention's. log_decay_t [B,H].
PriorRead gla_step(const at::Tensor& q_t, const at::Tensor& k_t, const at::Tensor& v_t,
                   const at::Tensor& log_decay_t, LinearAttentionState& state);

// Fused chunked scan (src/ops/gla/fused.cpp, derivation in README.md): chunks of 64 positions in log
// space, intra-chunk by block products with the exp(c_t - c_i) mask, inter-chunk through the carried
// state; O(T d) memory (chunk-boundary states saved for the hand-written backward). float32/float64.
// Same outputs and gradients (q, k, v, log_decay) as gla_naive. LRNN-decay is this op with dk = 1 unit
// features; linear attention is it with log_decay = 0.
PriorRead gla_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_decay);

// The one entry point: fused or naive.
constexpr ImplSet kGlaImpls = kFusedAndNaive;
PriorRead gla(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_decay, Impl impl);

}  // namespace seqmix::ops
