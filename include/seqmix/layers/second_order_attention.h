#pragma once
// The energy paper's Newton-inspired attentions (§3.2; ops/second_order.h for the reads).
//
// MHA2nd1st: per head, r_h = M_h (u_h + b_h) with the range-space pseudo-inverse
// M_h = W_Q,h^T (W_Q,h W_Q,h^T)^-1 (computed once per forward; gradients flow through the solve), then
// y = W_O [W_V,1 r_1; ...; W_V,H r_H]. W_V,h [d_h, d] acts on r_h, never on the attended tokens; the
// weights are MHA's plus the per-head temperature T_h (init sqrt(2 d_h)) and bias temperature (init 0.01).
// LightMHA2nd1st: y = W_O [vbar_h + tau_h Cov_p(v_h) vbar_h]_h, tau_h learnable (init 0.01).
#include "seqmix/layers/kv_attention.h"
#include "seqmix/layers/mixer_spec.h"

namespace seqmix {

struct SecondOrderAttentionOptions : KVAttentionOptions {
  // MHA2nd1st: the bias temperature multiplies b (c_h, init 0.01) or divides it (T_b, init 0.01).
  bool bias_temperature_divides = false;
  double tau = 0.01;  // Light: tau_h init; MHA2nd1st: the bias temperature's init
};

class LightMha2nd1stImpl : public KVAttentionImpl {
 public:
  explicit LightMha2nd1stImpl(const SecondOrderAttentionOptions& options);
  torch::Tensor tau;  // [H]

 protected:
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal) override;
};

class Mha2nd1stImpl : public MixerImpl {
 public:
  explicit Mha2nd1stImpl(const SecondOrderAttentionOptions& options);
  torch::Tensor forward(const torch::Tensor& x) override;
  DecodeState init_state(int64_t batch) const override;
  torch::Tensor step(const torch::Tensor& x_t, DecodeState& state) override;
  torch::Tensor prefill(const torch::Tensor& x, DecodeState& state) override;

  // q, k [B,T,H,d_h] of x [B,T,D] at positions offset.. (RoPE applied when on).
  std::pair<torch::Tensor, torch::Tensor> project(const torch::Tensor& x, int64_t offset);
  // The Newton directions in token space, r_h = M_h R_t^T (u_h + b_h) [B,T,H,D], for queries q at positions
  // offset.. against keys [B,S,H,d_h]. R_t^T undoes the query's rotation (q = R_t W_Q z, so the map back from
  // the rotated query space is W_Q^T (W_Q W_Q^T)^-1 R_t^T); it is the identity without RoPE.
  torch::Tensor directions(const torch::Tensor& q, const torch::Tensor& keys, bool causal, int64_t offset);

  torch::nn::Linear qk{nullptr}, out{nullptr};
  torch::Tensor value_weight;      // W_V [H, d_h, d]
  torch::Tensor temperature;       // T_h [H]
  torch::Tensor bias_temperature;  // c_h or T_b [H]

 private:
  torch::Tensor read(const torch::Tensor& q, const torch::Tensor& keys, bool causal, int64_t offset);
  SecondOrderAttentionOptions options_;
  int64_t head_dim_;
};

// The mixer's declaration for the registry (options, defaults, checks): beside the layer, in its .cpp.
const MixerDeclaration& mha2nd1st_mixer_declaration();
const MixerDeclaration& light2nd1st_mixer_declaration();

}  // namespace seqmix
