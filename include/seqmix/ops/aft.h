#pragma once
// AFT / LRNN-softmax prior, per channel: w_ti = exp(k_i) for i <= t, so
//   numerator_t = sum_{i<=t} exp(k_i - m_t) v_i,  normaliser_t = sum_{i<=t} exp(k_i - m_t),
// stabilised with the causal running max m_t = max_{r<=t} k_r (the shift cancels in the ratio, and no
// future key enters: exact causality). Shapes: k, v [B,T,C] (one key logit per value channel).
// An optional mask [B,T] (bool, true = real token) removes padded positions from the support.
// The running max starts at -1e30 rather than -inf, so exp(max_old - max_new) is always defined
// (keys are assumed > -1e29).
#include <ATen/core/Tensor.h>

#include "seqmix/ops/impl.h"
#include "seqmix/ops/operators.h"

#include "seqmix/ops/prior_read.h"

namespace seqmix::ops {

// Recurrent state: running numerator and normaliser relative to the running max of the keys.
struct AftState {
  at::Tensor numerator;   // [B,C]
  at::Tensor normaliser;  // [B,C]
  at::Tensor key_max;     // [B,C]
};
// (A fresh state: ops::aft_initial_state, operators.h; key_max -1e30.)

// The recurrence itself, one step per token (numerator and normaliser [B,T,C], both scaled by
// exp(-m_t); their ratio is the read).
// cu_seqlens (int64 [N+1], B = 1): N packed sequences, each read from a fresh state (here and below).
PriorRead aft_naive(const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask = {},
                    const at::Tensor& cu_seqlens = {});

// Fused twin of aft_naive (src/ops/aft/fused.cpp): one pass per (batch, channel) with the causal running
// max, and a reverse scan for the backward; O(T C) memory. Same outputs and gradients (k, v) as aft_naive.
PriorRead aft_fused(const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask = {},
                    const at::Tensor& cu_seqlens = {});

// State handoff (flash-linear-attention's initial_state / output_final_state): the read of positions 1..T when
// `initial` (all three tensors, or none = a fresh state) already holds the positions before them, and, when
// `final_state`, the state after position T (aft_step's layout; else left undefined). `zero_state` is the read
// from a fresh state by any impl. Exact: with m_t this call's running max and M the state's, both parts move
// to the joint max m'_t = max(M, m_t): numerator_t = numerator0_t e^{m_t - m'_t} + N e^{M - m'_t} (the
// normaliser likewise), every exponent <= 0. Autograd through ATen (src/ops/aft/state.cpp). Packed
// (cu_seqlens): one state per sequence, each [N,C], in and out.
struct AftReadWithState {
  PriorRead read;
  AftState final_state;
};
AftReadWithState continue_aft_scan(const PriorRead& zero_state, const at::Tensor& k, const at::Tensor& mask,
                                   const AftState& initial, bool final_state, const at::Tensor& cu_seqlens = {});

// The implementations of torch.ops.seqmix.aft and fem_aft_read, whose C++ entry points ops::aft, ops::aft_step and
// ops::fem_aft_read (operators.h) are generated from their schemas.
constexpr ImplSet kAftImpls{{Impl::fused, Impl::naive}, {"seqmix::_aft_forward"}};

}  // namespace seqmix::ops
