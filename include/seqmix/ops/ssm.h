#pragma once
// Diagonal selective state-space scan (Mamba-style), per channel c and state n:
//   h_t[c,n] = exp(delta_t[c] A[c,n]) h_{t-1}[c,n] + delta_t[c] b_t[n] u_t[c],
//   y_t[c]   = sum_n c_t[n] h_t[c,n].
// With delta > 0 and b, c >= 0 the impulse response is positive, so y(v) / y(1) is a normalised read.
// Shapes: u, delta [B,T,C]; A [C,N] (< 0); b, c [B,T,N]; y [B,T,C]. Always causal.
#include <ATen/core/Tensor.h>

#include "seqmix/ops/impl.h"
#include "seqmix/ops/operators.h"

namespace seqmix::ops {

// Sequential reference: one ATen step per token.
// cu_seqlens (int64 [N+1], B = 1): N packed sequences, each scanned from a zero state (here and below).
at::Tensor ssm_scan_naive(const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A,
                          const at::Tensor& b, const at::Tensor& c, const at::Tensor& cu_seqlens = {});

// Fused twin of ssm_scan_naive (src/ops/ssm/fused.cpp): the recurrence per (batch, channel) in
// registers, states checkpointed every 64 steps and recomputed in the reverse scan of the backward:
// B*T*C*N/64 saved values instead of the B*T*C*N a materialised scan would keep. Same outputs and gradients (u, delta, A, b, c) as ssm_scan_naive.
at::Tensor ssm_scan_fused(const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A, const at::Tensor& b,
                          const at::Tensor& c, const at::Tensor& cu_seqlens = {});

// The implementations of torch.ops.seqmix.ssm_scan, whose C++ entry points ops::ssm_scan and ops::ssm_step
// (operators.h) are generated from their schemas.
constexpr ImplSet kSsmScanImpls{{Impl::fused, Impl::naive}, {"seqmix::_ssm_scan_forward"}};

// The selective-SSM prior's normalised read (FEM paper §2.3.3 (iv), Prop. 2.9): S value streams in each of G groups
// read through one scan, each channel's weights the scan's impulse response plus the skip D, normalised by the same
// scan of an all-ones stream: one scan over [values, ones]. The FEM layer's ssm prior (G = heads, c = dv) and the
// fem_ssm_read operator (G = 1, c = C) both read through it.
//   delta [B,T,G*c] > 0; A [G*c,N] < 0; b, c [B,T,N] >= 0; D [G*c] or undefined (no skip); mask [B,T] bool or
//   undefined (the stream of ones is 0 at padding). In a decode step the same tensors without T.
struct SsmPriorParameters {
  at::Tensor delta, A, b, c, D, mask;
};
// values [B,T,G,S,c] -> E_p[values] [B,T,G,S,c] = numerator / max(normaliser, floor), in the values' type.
at::Tensor ssm_normalised_read(const at::Tensor& values, const SsmPriorParameters& prior, double floor, Impl impl,
                               const at::Tensor& cu_seqlens = {});
// One decode step: values_t [B,G,S,c] -> [B,G,S,c]; state [B,G*(S+1)*c,N] (channels ordered group, stream, c; the
// last stream of each group is the ones) is updated.
at::Tensor ssm_normalised_step(const at::Tensor& values_t, const SsmPriorParameters& prior_t, double floor,
                               at::Tensor& state);

}  // namespace seqmix::ops
