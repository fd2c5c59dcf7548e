#pragma once
// The HyperMLP read: attention as a dynamic two-layer MLP whose hidden width is the context length, with
// diagonal-plus-low-rank (DPLR) mixing along the sequence axis before and after the activation.
//
// For the query at position r (lag vector z[l] = q_r . k_{r-l}, l = 0..r, newest first):
//   h = z R1(r),  R1(r) = Diag(1 + p1[P(l)]) + U1[P(l)] Diag(s1_r) Vt1[:, P(l)]     (mixing before)
//   a = act(h)                                                                          (ReLU o L2Norm, GLU, softmax)
//   w = a R2(r),  R2(r) = Diag(1 + p2[P(l)]) + U2[P(l)] Diag(s2_r) Vt2[:, P(l)]     (mixing after)
//   o_r = inv_r * sum_l w[l] v_{r-l}
// P(l) is the parameter row of slot l: Lmax - 1 - l in the lag layout (the newest token always uses the last
// row, so older history extends the parameters at the front), the absolute position r - l in the forward
// layout. Derivations and the row-block algorithm are in src/ops/hypermlp/README.md.
#include <ATen/core/Tensor.h>

#include "seqmix/ops/impl.h"
#include "seqmix/ops/operators.h"

namespace seqmix::ops {

enum class HyperActivation {
  softmax,  // S: softmax over the visible slots (scores scaled by `scale`)
  relu,     // R: ReLU(h / sqrt(||h||^2 + eps))
  glu,      // G: Softplus(h_scale) * ReLU(h_gate / sqrt(||h_gate||^2 + eps)); 2H score heads, gate heads first
};

enum class HyperLayout {
  lag,      // o: parameter row Lmax - 1 - lag (truncation invariant)
  forward,  // parameter row = absolute position (the canonical top-left embedding of the forward order)
};

// One DPLR sequence mixer, per head: y R = y * (1 + diag) + ((y U) * s) Vt on the visible slots.
struct HyperMixing {
  at::Tensor diag;  // [Hm, Lmax] (p; D = I + Diag(p))
  at::Tensor U;     // [Hm, Lmax, r]
  at::Tensor Vt;    // [Hm, r, Lmax]
  bool defined() const { return U.defined(); }
  int64_t max_len() const { return U.size(1); }
};

struct HyperReadOptions {
  HyperActivation activation = HyperActivation::relu;
  HyperLayout layout = HyperLayout::lag;
  double eps = 1e-12;   // under the square root of the row norm (relu, glu)
  double scale = 1.0;   // multiplies the scores (softmax uses 1/sqrt(dqk); relu is scale-free)
  int64_t block = 256;  // query rows per block in the blocked read (0 = all rows in one block)
};

// q [B,T,Hq,dqk], k [B,S,Hq,dqk], v [B,S,H,dvo] -> [B,T,H,dvo]; the T queries are the last T of the S key
// positions (causal). Hq = H, or 2H for glu. s1 [B,T,Hq,r1] and mix1 (Hm = Hq) are the mixing before the
// activation, s2 [B,T,H,r2] and mix2 (Hm = H) after; either may be undefined (no mixing on that side). With
// mixing, S must not exceed its Lmax.
//
// Blocked: query rows in blocks, each block's score tile laid out so that the DPLR products are two GEMMs
// against a slice of U and Vt shared by the block's rows (no t x t mixing matrix); LibTorch autograd.
at::Tensor hypermlp_read_blocked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& s1, const HyperMixing& mix1, const at::Tensor& s2,
                                 const HyperMixing& mix2, const HyperReadOptions& options);
// The naive twin: the formula above row by row, with each row's R1 and R2 materialised. O(T^3); the
// reference of the tests.
at::Tensor hypermlp_read_dense(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const at::Tensor& s1, const HyperMixing& mix1, const at::Tensor& s2,
                               const HyperMixing& mix2, const HyperReadOptions& options);

// The implementations of torch.ops.seqmix.hypermlp_read, whose C++ entry point ops::hypermlp_read (operators.h) is
// generated from its schema: fused is the blocked read, naive the dense one. Both are ATen code, so both run on a
// GPU too.
constexpr ImplSet kHypermlpReadImpls{Impl::fused, Impl::naive};  // the blocked read is ATen code
// The arguments of ops::hypermlp_read for the mixings mix1 and mix2 (each undefined: none), options and impl.
HypermlpReadArgs hypermlp_read_args(const at::Tensor& s1, const HyperMixing& mix1, const at::Tensor& s2,
                                    const HyperMixing& mix2, const HyperReadOptions& options, Impl impl);

}  // namespace seqmix::ops
