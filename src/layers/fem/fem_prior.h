#pragma once
// The selection priors FEM reads through (paper App. H): each turns the token features into its own
// parameters (queries/keys, decays, step sizes) and reads any value stream through its op, in parallel
// and step by step. The mixer owns the value path; a prior never sees what the values mean.
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <optional>
#include <string>

#include "seqmix/modules/decode_state.h"
#include "seqmix/ops/fem.h"
#include "seqmix/ops/impl.h"

namespace seqmix {

struct FemPriorConfig {
  int64_t dim, heads, value_head_dim, qk_head_dim;
  bool rope;
  double rope_theta, gate_normalizer, eps;
  int64_t ssm_state;
  bool bias, causal;
  ops::Impl impl;  // fused kernels or the naive ops
};

// Per-position prior parameters. T = 1 when decoding.
struct PriorInputs {
  at::Tensor q, k;       // [B,T,H,dk]: softmax raw (after RoPE); linear/gla feature-mapped
  at::Tensor log_decay;  // [B,T,H] (gla, lrnn_decay)
  at::Tensor keys;       // [B,T,H,dv] per-channel key logits (aft)
  at::Tensor delta;      // [B,T,H,dv] step sizes (ssm)
  at::Tensor b, c;       // [B,T,N] (ssm)
  at::Tensor mask;       // [B,T] bool, or undefined
  // The same inputs in another floating-point type (the mask stays bool).
  PriorInputs to(at::ScalarType type) const;
};

class FemPriorImpl : public torch::nn::Module {
 public:
  explicit FemPriorImpl(FemPriorConfig config) : config_(config) {}
  virtual std::string name() const = 0;
  virtual bool supports_bidirectional() const { return false; }
  // Width of the conditioner slice that modulates this prior's parameters.
  virtual int64_t modulation_width() const = 0;
  // x [B,T,D]; modulation [B,T,modulation_width()] or undefined (added to the parameters' pre-activations);
  // positions [B,T] (int64): each token's position among the real tokens (RoPE).
  virtual PriorInputs prepare(const at::Tensor& x, const at::Tensor& modulation, const at::Tensor& mask,
                              const at::Tensor& positions) = 0;
  // values [B,T,H,W] (W a multiple of the value head width) -> E_p[values] [B,T,H,W].
  virtual at::Tensor read(const at::Tensor& values, const PriorInputs& in) = 0;
  // The one-pass fused read of mu and F (values v [B,T,H,dv], beta [H*dv], value cap), where the prior has
  // one and the config asks for fused kernels; nullopt means: read [v, exp(beta v - shift)] through read().
  virtual std::optional<ops::FemRead> fused_free_energy_read(const at::Tensor& values, const at::Tensor& beta,
                                                             double cap, const PriorInputs& in) {
    return std::nullopt;
  }
  // Decode over values of width W per head: values_t [B,H,W] -> E_p[values] at this step [B,H,W].
  virtual void init_state(DecodeState& state, int64_t batch, int64_t width) const = 0;
  virtual at::Tensor step(const at::Tensor& values_t, const PriorInputs& in_t, DecodeState& state) = 0;
  // Multiplies value channels [begin, end) of every head in the state by factor [B,H,end-begin].
  virtual void rescale(DecodeState& state, int64_t begin, int64_t end, const at::Tensor& factor) = 0;
  const FemPriorConfig& config() const { return config_; }

 protected:
  FemPriorConfig config_;
};
using FemPrior = std::shared_ptr<FemPriorImpl>;

// "softmax", "linear", "gla", "aft", "lrnn_decay" or "ssm".
FemPrior make_fem_prior(const std::string& name, const FemPriorConfig& config);
const std::vector<std::string>& fem_prior_names();
// Whether the prior has queries and keys (RoPE applies).
bool fem_prior_has_qk(const std::string& name);

}  // namespace seqmix
