#pragma once
// The energy framework of the energy-attention paper (§2), usable for research: a local energy E_i(z, h_i),
// a global energy F combining them, and an optimiser. The `energy` mixer moves each token z_t by the
// optimiser's steps on F(z; h_1..h_t), the gradients (and Hessians) taken by autograd, so any recipe runs
// without a kernel. Multi-head average form: per head q = W1,h z, k_i = W2,h h_i, F = (1/H) sum_h F_h.
//
// Local energies (q, k_i):   abs_inner |q.k_i|, neg_inner -q.k_i, half_sq_distance ||q - k_i||^2 / 2,
//                            lp ||q - k_i||_p^p, huber (1/2 r^2 for r = ||q - k_i|| <= delta, else delta (r - delta/2)).
// Global energies (E_i):     neg_sum_squares -T/2 sum_i E_i^2, gated_sum_squares -T/2 sum_i gamma_i E_i^2 with
//                            gamma_i = prod_{r=i+1..t} sigmoid(w_h . h_r + b_h) (a learnable forgetting gate),
//                            helmholtz -T log sum_i exp(-E_i / T).
// Optimisers (per step):     gd z <- z - eta g; momentum p <- beta p + g, z <- z - eta p; nesterov the same
//                            with g at z - beta p; newton z <- z - (eta/H) sum_h H_h^+ g_h (autograd Hessian of
//                            each head, Moore-Penrose = the paper's range-space inverse); newton_taylor (helmholtz
//                            with half_sq_distance only): H_h^+ g_h ~ M_h (u + Cov_p(k) u / T), M_h = W1^T (W1 W1^T)^-1.
// The mixer returns the update z_K - z_0 (the model adds the residual).
#include <torch/nn/modules/linear.h>

#include "seqmix/layers/mixer.h"
#include "seqmix/layers/mixer_spec.h"

namespace seqmix {

struct EnergyMixerOptions {
  int64_t dim = 128;
  int64_t heads = 4;
  std::string local = "neg_inner";
  std::string global = "helmholtz";
  std::string optimizer = "gd";
  int64_t steps = 1;
  double eta = 1.0;
  double beta = 0.9;         // momentum, nesterov
  double temperature = 0.0;  // 0 = sqrt(d_h)
  double p = 1.5;            // lp
  double delta = 1.0;        // huber
};

class EnergyMixerImpl : public MixerImpl {
 public:
  explicit EnergyMixerImpl(const EnergyMixerOptions& options);
  torch::Tensor forward(const torch::Tensor& x) override;
  DecodeState init_state(int64_t batch) const override;
  torch::Tensor step(const torch::Tensor& x_t, DecodeState& state) override;
  torch::Tensor prefill(const torch::Tensor& x, DecodeState& state) override;

  // Per query: F (1/H sum_h F_h, or each head's F_h with per_head) of z [B,T,D] against the context h
  // [B,S,D] (the queries are the last T positions). [B,T] or [B,T,H].
  torch::Tensor energy(const torch::Tensor& z, const torch::Tensor& h, bool per_head = false);
  double temperature() const { return temperature_; }

  torch::nn::Linear w1{nullptr}, w2{nullptr};  // q = W1 z, k = W2 h (per head, d_h = D/H)
  torch::nn::Linear gate{nullptr};            // gated_sum_squares: per-head forgetting logits

 private:
  // The update of z [B,T,D] (queries) given the context h [B,S,D].
  torch::Tensor update(const torch::Tensor& x, const torch::Tensor& h);
  torch::Tensor gradient(const torch::Tensor& z, const torch::Tensor& h, bool create_graph);
  torch::Tensor newton_direction(const torch::Tensor& z, const torch::Tensor& h, bool create_graph);
  torch::Tensor taylor_direction(const torch::Tensor& z, const torch::Tensor& h);
  EnergyMixerOptions options_;
  int64_t head_dim_;
  double temperature_;
};

// The mixer's declaration for the registry (options, defaults, checks): beside the layer, in its .cpp.
const MixerDeclaration& energy_mixer_declaration();

}  // namespace seqmix
