#pragma once
// The free-energy read. For a prior p_t and per-channel inverse temperature beta:
//   mu_t  = E_p[v],   F_t = (1/beta) log E_p[exp(beta v)].
// FEM reads the values [v, e] through the prior's own op, with e = exp(beta*v - shift) for a shift that
// is the same for every key of a read (so it cancels exactly): with the value cap |beta*v| <= cap the
// constant shift = cap keeps e in [exp(-2 cap), 1], representable in fp32 for cap <= 43.
#include <ATen/core/Tensor.h>

#include <functional>

#include "seqmix/ops/impl.h"
#include "seqmix/ops/operators.h"

namespace seqmix::ops {

constexpr double kMaxConstantShiftCap = 43.0;  // exp(-2*43) > fp32's smallest normal
// Largest cap the fused softmax read takes in float32 (its bounds, src/ops/fem/README.md).
constexpr double kFemFusedMaxCap = 40.0;

// The outputs of torch.ops.seqmix.fem_scale_values (ops::fem_scale_values, operators.h): clipped is v clamped to
// [-cap/beta, cap/beta] (the mean branch reads it too; v when cap = 0), scaled is u = beta * clipped.
using FemValues = FemScaleValuesOutputs;

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

// The implementations of the softmax prior's read (torch.ops.seqmix.fem_softmax_read, whose C++ entry point
// ops::fem_softmax_read, operators.h, is generated from its schema): fused, naive, or torch:
// one PyTorch SDPA call over [clip(v), exp(beta clip(v) - cap)] (2 dv wide) in the inputs' precision, the FEM
// authors' read (fem_capped_read with read_type float32; needs cap > 0), which runs on every device. The fused form
// has a GPU kernel too (src/ops/fem/fused_cuda.cpp: the Triton kernels, float32/float16/bfloat16 inputs), which has
// passed on a GPU: auto takes it there for the inputs it reads, else PyTorch's SDPA (impl.h).
constexpr ImplSet kFemSoftmaxReadImpls{{Impl::fused, Impl::naive, Impl::torch}, {"seqmix::_fem_softmax_forward"}};

// The free-energy read through any prior that is linear in its values, the one FEM's layer (forward and
// decode step) and the fem_*_read operators all run: the values scaled and clipped once (scale: fem_scale_values,
// u = beta clip(v)), one read of [clip(v), exp(u - shift)] stacked on the last axis, then mu = E_p[clip(v)] and
// F = (log max(z, tiny) + shift) / beta from z = E_p[exp(u - shift)].
//   v       [..., channels]: any layout the read takes; beta has the shape of v's trailing channel axes ([H,dv] for
//           v [B,T,H,dv] or [B,H,dv], [C] for v [B,T,C]).
//   shift   shift_of(u) (broadcast against v), or the constant cap where shift_of is empty (cap > 0).
//   support bool, broadcast against v, or undefined for all: sets exp(u - shift) to 0 where false.
// The read runs in read_type (float64 where exp(u - shift) reaches exp(-2 cap): its products with small
// weights leave float32's range), and mu and F come back in v's type. The values are scaled by
// seqmix::fem_scale_values through the dispatcher for a layer; an operator, which runs inside the dispatcher
// already, passes ScaleValuesBy::operator_function (the operator's own function, no second dispatch).
using ValueRead = std::function<at::Tensor(const at::Tensor& values)>;
using ShiftOf = std::function<at::Tensor(const at::Tensor& scaled)>;
enum class ScaleValuesBy { dispatcher, operator_function };
FemRead fem_free_energy_read(const at::Tensor& v, const at::Tensor& beta, double cap, const ShiftOf& shift_of,
                             const at::Tensor& support, at::ScalarType read_type, const ValueRead& read,
                             ScaleValuesBy scale = ScaleValuesBy::dispatcher);

// What the fem_<prior>_read operators compute, as the FEM layer does with a value cap: fem_free_energy_read of
// v with the constant shift cap, in float64. v [B,T,H,dv] (per-head priors) or [B,T,C] (per-channel priors),
// beta with one entry per value channel ([H*dv], [H,dv] or [C]), cap in (0, 43]; `read` maps the stacked values
// [...,2W] to their normalised read. Bad arguments are errors naming `op`. read_type float32 instead reads as the FEM
// authors' layer does (float32-accurate unless the weight sits on values near -cap/beta, whose terms
// p exp(u - cap) fall below float32's normal range: src/ops/fem/README.md); the fem_<prior>_read operators read in
// float64.
FemRead fem_capped_read(const char* op, const at::Tensor& v, const at::Tensor& beta, double cap, const ValueRead& read,
                        at::ScalarType read_type = at::kDouble);

}  // namespace seqmix::ops
