#pragma once
// The priors that read through a linear-attention state S = sum_i w_i k_i (x) v_i (linear, gla, lrnn_decay):
// the normalised read, the decode state and its rescaling, in one place.
#include <torch/torch.h>

#include "prior.h"
#include "seqmix/ops/linear_attention.h"

namespace seqmix {

class LinearStatePrior : public PriorImpl {
 public:
  using PriorImpl::PriorImpl;
  std::any init_state(int64_t batch, int64_t width) const override {
    const auto options = recurrent_state_options(state_options());
    const auto s = ops::linear_attention_initial_state(
        batch, config_.heads, feature_dim(), width, {.dtype = options.dtype().toScalarType(), .device = options.device()});
    return ops::LinearAttentionState{s.kv, s.k_sum};
  }
  void rescale(std::any& state, int64_t begin, int64_t end, const at::Tensor& factor) override {
    auto& s = state_of<ops::LinearAttentionState>(state);
    auto kv = s.kv.clone();
    kv.narrow(-1, begin, end - begin).mul_(factor.unsqueeze(2));
    s.kv = kv;
  }

 protected:
  virtual int64_t feature_dim() const = 0;
  virtual at::TensorOptions state_options() const = 0;
  // E_p[values] = numerator / max(normaliser, floor), or the numerator alone without normalize, from a read's
  // outputs (ops::GlaOutputs, ops::LinearAttentionOutputs, ...: any with a numerator and a normaliser).
  template <class Read>
  at::Tensor finish(const Read& r) const {
    return config_.normalize ? ops::normalised_read(r.numerator, r.normaliser, config_.floor) : r.numerator;
  }
  // The same for a decode step's outputs [B,1,...] -> [B,...], the state moved on to the step's kv and k_sum.
  template <class StepOutputs>
  at::Tensor finish_step(const StepOutputs& r, ops::LinearAttentionState& state) const {
    state = {r.kv, r.k_sum};
    return finish(r).squeeze(1);
  }
};

}  // namespace seqmix
