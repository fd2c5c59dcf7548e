#pragma once
// The free-energy read. For a prior p_t and per-channel inverse temperature beta:
//   mu_t  = E_p[v],   F_t = (1/beta) log E_p[exp(beta v)].
// FEM reads the values [v, e] through the prior's own op, with e = exp(beta*v - shift) for a shift that
// is the same for every key of a read (so it cancels exactly): with the value cap |beta*v| <= cap the
// constant shift = cap keeps e in [exp(-2 cap), 1], representable in fp32 for cap <= 43.
#include <ATen/core/Tensor.h>

namespace seqmix::ops {

constexpr double kMaxConstantShiftCap = 43.0;  // exp(-2*43) > fp32's smallest normal
// Largest cap the fused softmax read takes in float32 (its bounds, src/ops/fem/README.md).
constexpr double kFemFusedMaxCap = 40.0;

struct FemValues {
  at::Tensor clipped;  // v clamped to [-cap/beta, cap/beta] (the mean branch reads it too); v when cap = 0
  at::Tensor scaled;   // u = beta * clipped
};
// v [...,C], beta [C] > 0. The clamp uses minimum/maximum so beta gets a gradient through the limit.
FemValues fem_scale_values(const at::Tensor& v, const at::Tensor& beta, double cap);
// L / beta with L = log(z) + shift: z [...,C] the read of exp(u - shift), shift broadcastable.
at::Tensor fem_restore(const at::Tensor& z, const at::Tensor& shift, const at::Tensor& beta);

struct FemRead {
  at::Tensor mean;         // mu [B,T,H,dv]
  at::Tensor free_energy;  // F_max [B,T,H,dv]
};

// Ground truth for the softmax prior, written as the definition: P = softmax(scale q k^T) (masked),
// mu = P vc, F = logsumexp_i(log P_ti + beta vc_i) / beta per channel, materialising [B,H,T,S,dv].
// q [B,T,H,dk], k [B,S,H,dk], v [B,S,H,dv], beta [H*dv] or [H,dv]; cap 0 = no clamp.
FemRead fem_softmax_read_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                               double cap, bool causal, double scale, const at::Tensor& key_mask = {});

// Fused twin of fem_softmax_read_naive for cap > 0 (src/ops/fem/fused.cpp, derivation in README.md): one
// flash-style pass returns mu and F together, the exp branch held relative to a per-channel running max of
// beta*v over the keys every row of a query block sees (exact causality); saves the row log-sum-exp, mu
// and F for the hand-written backward. Same outputs and gradients (q, k, v, beta) as the naive op.
// float32 needs cap <= 40 (kFemFusedMaxCap), float64 any cap in (0, 43].
FemRead fem_softmax_read_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                               double cap, bool causal, double scale, const at::Tensor& key_mask = {});

}  // namespace seqmix::ops
