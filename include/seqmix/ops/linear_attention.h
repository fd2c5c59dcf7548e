#pragma once
// Linear attention: the prior w_ti = q_t . k_i over feature-mapped queries and keys (non-negative
// features give a normalised read). Shapes: q, k [B,T,H,dk], v [B,T,H,dv].
#include <ATen/core/Tensor.h>

#include "seqmix/ops/impl.h"
#include "seqmix/ops/operators.h"

#include "seqmix/ops/prior_read.h"

namespace seqmix::ops {

// Cumulative form: S_t = sum_{i<=t} k_i (x) v_i materialised as [B,T,H,dk,dv] (causal) or the full
// sum (bidirectional); numerator_t = q_t S_t, normaliser_t = q_t . sum_{i<=t} k_i.
// cu_seqlens (int64 [N+1], B = 1): N packed sequences, each read as if alone (here and in every entry point below).
PriorRead linear_attention_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 bool causal, const at::Tensor& cu_seqlens = {});

// Recurrent state of the causal scan: kv = sum k (x) v [B,H,dk,dv], k_sum = sum k [B,H,dk].
struct LinearAttentionState {
  at::Tensor kv;
  at::Tensor k_sum;
};
// (zeros: ops::linear_attention_initial_state, operators.h.)

// State handoff, flash-linear-attention's initial_state and output_final_state: the causal read of positions
// 1..T when `initial` (kv [B,H,dk,dv], k_sum [B,H,dk]; both undefined = zeros) already holds the positions
// before them, and, when `final_state`, the state after position T (else left undefined). `zero_state` is the
// read from zeros by any impl; log_decay [B,T,H] or [B,T,H,dk] <= 0 for GLA, undefined for linear attention. Exact, with
// c_t = a_1 + ... + a_t: the initial state adds e^{c_t} q_t S_0 (and e^{c_t} q_t . z_0), the final state is
// e^{c_T} S_0 + sum_i e^{c_T - c_i} k_i v_i^T (every exponent <= 0). Autograd through ATen (src/ops/gla/state.cpp).
struct ReadWithState {
  PriorRead read;
  LinearAttentionState final_state;
};
// The initial state must be both tensors or neither, kv [B,H,dk,dv] and k_sum [B,H,dk] of q's dtype; the error
// names `op`.
void check_initial_state(const char* op, const LinearAttentionState& initial, const at::Tensor& q, const at::Tensor& v);
ReadWithState continue_decayed_scan(const PriorRead& zero_state, const at::Tensor& q, const at::Tensor& k,
                                    const at::Tensor& v, const at::Tensor& log_decay,
                                    const LinearAttentionState& initial, bool final_state);
// The same for packed sequences (cu_seqlens, B = 1; undefined: continue_decayed_scan itself): one state per
// sequence in and out, kv [N,H,dk,dv] and k_sum [N,H,dk], each sequence's slice continued on its own.
ReadWithState continue_packed_scan(const PriorRead& zero_state, const at::Tensor& q, const at::Tensor& k,
                                   const at::Tensor& v, const at::Tensor& log_decay,
                                   const LinearAttentionState& initial, bool final_state,
                                   const at::Tensor& cu_seqlens);

// Fused twin of linear_attention_naive with O(T d) memory: causal runs GLA's chunked scan with zero decay
// (gla_fused), bidirectional reads q (K^T V) and q . sum k. Same outputs and gradients as the naive op.
PriorRead linear_attention_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                 const at::Tensor& cu_seqlens = {});

// In ATen matrix products, any device (src/ops/linear_attention/chunked.cpp): causal is gla_chunked with zero decay,
// bidirectional q (K^T V) and q . sum k. O(T) memory; packed sequences run once per sequence (eager only).
PriorRead linear_attention_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                   const at::Tensor& cu_seqlens = {});

// The implementations of torch.ops.seqmix.linear_attention and fem_linear_read, whose C++ entry points
// ops::linear_attention, ops::linear_attention_step and ops::fem_linear_read (operators.h) are generated from their
// schemas.
constexpr ImplSet kLinearAttentionImpls{{Impl::fused, Impl::naive, Impl::chunked}, {"seqmix::_gla_forward"}};

}  // namespace seqmix::ops
