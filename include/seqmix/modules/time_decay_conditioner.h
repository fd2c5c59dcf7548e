#pragma once
// FEM's time-decay conditioner (TDC, paper App. I): a low-rank causal convolution with an
// input-conditioned exponential decay kernel, computed by its exact recurrence
//   x^ = LN(x), s = softplus(x^ W_f), u = x^ W_x, a = softplus(x^ W_s)        (width H_c each)
//   h~_t = exp(-s_t) h~_{t-1} + u_t       (= sum_i exp(-sum_{r=i+1..t} s_r) u_i, in log space)
//   c_t = (SiLU(a_t / ||a_t||) * LN(h~_t)) W_c                                  (width D_c)
// W_c starts at zero, so the conditioner is an exact no-op at initialisation. A padding mask zeroes
// s and u at padded positions: they neither decay nor feed the state.
#include "seqmix/ops/impl.h"
#include <torch/nn/modules/linear.h>

#include "seqmix/ops/linear_attention.h"
#include "seqmix/modules/norm.h"

namespace seqmix {

class TimeDecayConditionerImpl : public torch::nn::Module {
 public:
  // impl: the recurrence through the fused chunked scan or the naive T x T form.
  TimeDecayConditionerImpl(int64_t dim, int64_t hidden, int64_t out_width, ops::Impl impl = ops::Impl::automatic);
  // x [B,T,D], mask [B,T] bool or undefined -> c [B,T,D_c]
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask = {});
  // Decode: x_t [B,D] -> c_t [B,D_c] through the scan's state h~ (GLA's layout, unit features).
  ops::LinearAttentionState init_state(int64_t batch) const;
  // mask_t [B] bool (true = real token) or undefined.
  torch::Tensor step(const torch::Tensor& x_t, ops::LinearAttentionState& state, const torch::Tensor& mask_t = {});

  int64_t hidden() const { return hidden_; }
  std::shared_ptr<LayerNormImpl> input_norm, hidden_norm;
  torch::nn::Linear decay{nullptr}, input{nullptr}, shortcut{nullptr};
  torch::Tensor output;  // W_c [H_c, D_c]

 private:
  struct Terms {
    torch::Tensor log_decay, u, gate;  // [..,H_c]
  };
  Terms terms(const torch::Tensor& x, const torch::Tensor& mask);
  torch::Tensor finish(const torch::Tensor& h, const torch::Tensor& gate);
  int64_t hidden_;
  ops::Impl impl_;
};
TORCH_MODULE(TimeDecayConditioner);

}  // namespace seqmix
