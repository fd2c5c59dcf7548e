#pragma once
// The Free Energy Mixer (FEM, fem_paper.txt section 2.3): a value-aware, per-channel free-energy read on
// any selection prior p_t:
//   mu_t = E_p[v],  F_t = (1/beta) log E_p[exp(beta v)]   (beta per channel, learnable, softplus)
//   y_t  = g_t * ((1 - lambda_t) mu_t + lambda_t F_t)      (lambda = sigmoid, g = softplus, RMS 1 per head)
//   out  = W_o y
// Flags name the paper's modules: C (time-decay conditioner), L (the log-sum-exp read), T (linearised
// temperature learning: lambda and a learnable beta), G (outer gate). Without T the read is F at beta = 1;
// without L it is the plain expectation mu. See docs/fem.md for every choice and where the authors'
// code differs.
#include <torch/nn/modules/linear.h>

#include <any>
#include <map>
#include <optional>
#include <string>

#include "seqmix/ops/impl.h"
#include "seqmix/layers/mixer.h"
#include "seqmix/modules/time_decay_conditioner.h"
#include "seqmix/layers/mixer_spec.h"

namespace seqmix {

class PriorImpl;

struct FemOptions {
  // fused kernels, or their naive twins; unset (auto): fused, except that cap=0 (causal) streams step by step
  std::optional<ops::Impl> impl;
  int64_t dim = 128;
  int64_t heads = 4;
  std::string prior = "softmax";  // a selection prior of src/layers/priors (softmax, linear, gla, aft, ...)
  bool conditioner = true, lse = true, temperature = true, gate = true;  // flags C, L, T, G
  std::string budget = "i";       // i: d = D/2, r = 4;  ii: d = 2D/3, r = 2
  int64_t value_dim = 0;          // d (all heads); 0 = from the budget
  int64_t qk_dim = 0;             // query/key width (all heads); 0 = from the budget
  int rope = -1;                  // -1 = on for the query/key priors
  double rope_theta = 10000.0;
  double beta_offset = 1.8;       // beta = softplus(param + offset), param initialised to 0
  double cap = 40.0;              // |beta v| <= cap (0 = no cap; the read then tracks running maxima)
  int64_t tdc_hidden = 0;         // conditioner width H_c; 0 = d/16
  // Each prior's own options struct by prior name (declared in src/layers/priors/<prior>.cpp; a spec's prior
  // options such as ssm_state or gate_normalizer read into it); a prior not named here takes its defaults.
  std::map<std::string, std::any> prior_options;
  double eps = 1e-6;              // ReLU + eps features; gate RMS floor
  bool bias = true;
  bool causal = true;
  bool raw_values = false;  // values are the inputs (d = D) and the read is the output: no W_v, no W_o
};

// The priors FEM reads through (src/layers/priors): softmax, linear, gla, aft, lrnn_decay, ssm, ...
std::vector<std::string> fem_prior_names();

// Parses "CLTG"-style flags into the four switches; throws Error on unknown letters.
void parse_fem_flags(const std::string& flags, FemOptions& options);
// The rules across FEM's own options, one function for the spec's check and the constructor: heads, T needs L, the
// cap's range, the implementations the cap allows. (What depends on the prior and the widths, such as rope=1 without
// queries or a causal-only prior with causal=0, is checked where the prior is made, in the constructor.) Throws Error
// naming the option.
void check_fem_options(const FemOptions& options);
std::string fem_flags(const FemOptions& options);

// The widths a budget gives: d (value, all heads) and the query/key width (all heads).
struct FemWidths {
  int64_t value = 0, qk = 0;
};
FemWidths fem_widths(const FemOptions& options);

class FemImpl : public MixerImpl {
 public:
  explicit FemImpl(const FemOptions& options);
  torch::Tensor forward(const torch::Tensor& x) override;
  torch::Tensor forward_masked(const torch::Tensor& x, const torch::Tensor& padding_mask) override;
  DecodeState init_state(int64_t batch) const override;
  torch::Tensor step(const torch::Tensor& x_t, DecodeState& state) override;

  const FemOptions& options() const { return options_; }
  const FemWidths& widths() const { return widths_; }
  // beta per value channel [d]: softplus(param + offset) with T, 1 without.
  torch::Tensor beta() const;
  torch::nn::Linear value{nullptr}, output{nullptr}, lambda_proj{nullptr}, gate_proj{nullptr};
  torch::Tensor beta_param;
  std::shared_ptr<PriorImpl> prior;  // its parameters are prior.*
  TimeDecayConditioner conditioner{nullptr};

 private:
  struct Projected;
  // positions [B,T]: each token's index among the real (unpadded) tokens.
  Projected project(const torch::Tensor& x, const torch::Tensor& mask, const torch::Tensor& positions,
                    const torch::Tensor& modulation);
  torch::Tensor combine(const torch::Tensor& mu, const torch::Tensor& free_energy, const Projected& p);
  torch::Tensor run(const torch::Tensor& x, const torch::Tensor& mask);
  torch::Tensor step_masked(const torch::Tensor& x_t, const torch::Tensor& mask_t, DecodeState& state);
  FemOptions options_;
  FemWidths widths_;
  int64_t head_dim_;
};

// The mixer's declaration for the registry (options, defaults, checks): beside the layer, in its .cpp.
const MixerDeclaration& fem_mixer_declaration();

}  // namespace seqmix
