#pragma once
// The priors that read through GLA's op, a decayed linear state (gla, lrnn_decay): they differ in their inputs
// only. The decay Linear (one logit per head, or per head and key feature) and the read and decode step live here.
#include "linear_state.h"
#include "query_key.h"
#include "seqmix/modules/init.h"
#include "seqmix/ops/gla.h"

namespace seqmix {

// The decayed-linear priors' own options (PriorConfig::own): FEM's spec sets gate_normalizer; the gla mixer sets
// both.
struct DecayOptions {
  double gate_normalizer = 16.0;  // log decay = logsigmoid(.) / gate_normalizer
  bool per_key_decay = false;     // gla: a decay per key feature [B,T,H,dk] (the GLA paper's gates), else per head
};
// The options of DecayOptions that FEM's spec takes (fem:prior=gla,gate_normalizer=8).
inline std::vector<Field<DecayOptions>> decay_option_fields() {
  return {Field<DecayOptions>::real("gate_normalizer", &DecayOptions::gate_normalizer,
                                    "gla/lrnn_decay log decay divisor", 1e-6)};
}

class DecayedLinearPrior : public LinearStatePrior {
 public:
  explicit DecayedLinearPrior(const PriorConfig& c, DecayOptions decay = {}) : LinearStatePrior(c), decay_options_(decay) {}
  bool reads_packed() const override { return true; }
  at::Tensor read(const at::Tensor& values, const PriorInputs& in) override {
    return finish(
        ops::gla(in.q, in.k, values, in.input("log_decay"), {.impl = config_.impl, .cu_seqlens = in.cu_seqlens}));
  }
  at::Tensor step(const at::Tensor& values_t, const PriorInputs& in, std::any& state) override {
    auto& s = state_of<ops::LinearAttentionState>(state);
    return finish_step(ops::gla_step(in.q.squeeze(1), in.k.squeeze(1), values_t, in.input("log_decay").squeeze(1), s.kv,
                                     s.k_sum),
                       s);
  }

 protected:
  // The decay logits per token: one per head, or one per head and key feature (per_key_decay).
  int64_t decay_width() const { return config_.heads * (decay_options_.per_key_decay ? config_.qk_head_dim : 1); }
  // The decay Linear "decay" [decay_width, D] with a bias, in `where`: initialised now (separate layout) or by
  // init_decay().
  void create_decay(torch::nn::Module& where) {
    if (config_.layout == QueryKeyLayout::packed)
      decay_ = where.register_module("decay", torch::nn::Linear(config_.dim, decay_width()));
    else
      decay_ = make_linear(where, "decay", config_.dim, decay_width(), true);
  }
  void init_decay() {
    if (config_.layout == QueryKeyLayout::packed) init_linear(decay_);
  }
  // a_t = logsigmoid(w . x + b + modulation) / gate_normalizer, [B,T,H] or [B,T,H,dk] (per_key_decay), 0 at
  // padded positions.
  at::Tensor log_decay(const at::Tensor& x, const at::Tensor& modulation, const at::Tensor& mask) {
    auto a = at::log_sigmoid(plus_modulation(decay_(x), modulation)) / decay_options_.gate_normalizer;
    if (decay_options_.per_key_decay) a = a.view({x.size(0), x.size(1), config_.heads, config_.qk_head_dim});
    if (!mask.defined()) return a;
    auto real = mask.to(a.scalar_type()).view({mask.size(0), mask.size(1)});
    return a * (decay_options_.per_key_decay ? real.unsqueeze(-1).unsqueeze(-1) : real.unsqueeze(-1));
  }
  DecayOptions decay_options_;
  torch::nn::Linear decay_{nullptr};
};

}  // namespace seqmix
