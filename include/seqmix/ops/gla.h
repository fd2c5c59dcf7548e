#pragma once
// Gated linear attention with a data-dependent decay in log space, one per head or one per key feature:
//   S_t = diag(exp(a_t)) S_{t-1} + k_t (x) v_t,   z_t = exp(a_t) ⊙ z_{t-1} + k_t,
//   numerator_t = q_t S_t,   normaliser_t = q_t . z_t,
// with log_decay a <= 0 either [B,T,H] (per head, every row of S decays alike) or [B,T,H,dk] (per key
// feature, the GLA paper's gates). q, k [B,T,H,dk], v [B,T,H,dv]. Always causal. cu_seqlens (int64 [N+1],
// flash-linear-attention's convention, B = 1) packs N sequences, each scanned from a zero state as if alone.
#include <ATen/core/Tensor.h>

#include "seqmix/ops/impl.h"

#include "seqmix/ops/linear_attention.h"
#include "seqmix/ops/operators.h"
#include "seqmix/ops/prior_read.h"

namespace seqmix::ops {

// Parallel form with the decay matrix exp(c_t - c_i), c = cumsum(a), for i <= t (every exponent <= 0,
// so it is stable for any length), materialised as [B,H,T,T] (per head) or [B,H,T,T,dk] (per key).
PriorRead gla_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& log_decay, const at::Tensor& cu_seqlens = {});

// Fused scan with a hand-written backward (derivations in README.md), O(T d) memory (chunk-boundary states
// saved for the backward), float32/float64. Per head (src/ops/gla/fused.cpp): chunks of 64 positions in log
// space, intra-chunk by block products with the exp(c_t - c_i) mask, inter-chunk through the carried state.
// Per key (fused_per_key.cpp): a recurrent scan over the state, exact per-step gradients.
// Same outputs and gradients (q, k, v, log_decay) as gla_naive. LRNN-decay is this op with dk = 1 unit
// features; linear attention is it with log_decay = 0.
PriorRead gla_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_decay,
                    const at::Tensor& cu_seqlens = {});

// Chunked form in ATen matrix products (src/ops/gla/chunked.cpp, derivation in README.md), any device, autograd by
// composition: chunks of 64 positions (16 with a decay per key, whose intra-chunk weights are [chunk, chunk, dk]),
// the intra-chunk weights with exact exp(c_t - c_i) <= 1, the inter-chunk state [B,H,dk,dv+1] carried from chunk to
// chunk (the normaliser is the value column of ones). O(T) memory. Same outputs and gradients as gla_naive;
// packed sequences (cu_seqlens) run once per sequence, so eager only.
PriorRead gla_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_decay,
                      const at::Tensor& cu_seqlens = {});

// The implementations of torch.ops.seqmix.gla and fem_gla_read, whose C++ entry points ops::gla, ops::gla_step and
// ops::fem_gla_read (operators.h) are generated from their schemas.
constexpr ImplSet kGlaImpls{{Impl::fused, Impl::naive, Impl::chunked}, {"seqmix::_gla_forward"}};

}  // namespace seqmix::ops
