#pragma once
// The priors that read through GLA's op, a decayed linear state (gla, lrnn_decay): they differ in their inputs
// only. The decay Linear (one logit per head) and the read and decode step live here.
#include "linear_state.h"
#include "query_key.h"
#include "seqmix/modules/init.h"
#include "seqmix/ops/gla.h"

namespace seqmix {

class DecayedLinearPrior : public LinearStatePrior {
 public:
  using LinearStatePrior::LinearStatePrior;
  at::Tensor read(const at::Tensor& values, const PriorInputs& in) override {
    return finish(ops::gla(in.q, in.k, values, in.log_decay, config_.impl));
  }
  at::Tensor step(const at::Tensor& values_t, const PriorInputs& in, std::any& state) override {
    auto& s = state_of<ops::LinearAttentionState>(state);
    return finish(ops::gla_step(in.q.squeeze(1), in.k.squeeze(1), values_t, in.log_decay.squeeze(1), s)).squeeze(1);
  }

 protected:
  // The decay Linear "decay" [H, D] with a bias, in `where`: initialised now (separate layout) or by init_decay().
  void create_decay(torch::nn::Module& where) {
    if (config_.layout == QueryKeyLayout::packed)
      decay_ = where.register_module("decay", torch::nn::Linear(config_.dim, config_.heads));
    else
      decay_ = make_linear(where, "decay", config_.dim, config_.heads, true);
  }
  void init_decay() {
    if (config_.layout == QueryKeyLayout::packed) init_linear(decay_);
  }
  // a_t = logsigmoid(w . x + b + modulation) / gate_normalizer per head [B,T,H], 0 at padded positions.
  at::Tensor log_decay(const at::Tensor& x, const at::Tensor& modulation, const at::Tensor& mask) {
    auto a = at::log_sigmoid(plus_modulation(decay_(x), modulation)) / config_.gate_normalizer;
    return mask.defined() ? a * mask.to(a.scalar_type()).unsqueeze(-1) : a;
  }
  torch::nn::Linear decay_{nullptr};
};

}  // namespace seqmix
