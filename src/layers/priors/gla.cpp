// The gated-linear-attention prior: the linear prior's features with a data-dependent decay per head,
// a_t = logsigmoid(w . x_t + b) / gate_normalizer (0 at padded positions), so w_ti = exp(sum_{r=i+1..t} a_r)
// phi(q_t) . phi(k_i); with per_key_decay a_t has one entry per key feature and w_ti = sum_f phi(q_t)_f
// phi(k_i)_f exp(sum_{r=i+1..t} a_rf). FEM's gla prior and the gla mixer's read (normalize=0: the numerator, q / sqrt(dk)).
#include <cmath>

#include "decayed_linear.h"
#include "query_key.h"

namespace seqmix {
namespace {

class GlaPrior : public DecayedLinearPrior {
 public:
  GlaPrior(const PriorConfig& c, torch::nn::Module& home) : DecayedLinearPrior(c, own_options<DecayOptions>(c)) {
    auto& where = c.layout == QueryKeyLayout::packed ? home : *this;
    qk_.create(where, c);
    create_decay(where);
  }
  std::string name() const override { return "gla"; }
  int64_t modulation_width() const override { return 2 * config_.heads * config_.qk_head_dim + decay_width(); }
  void init_parameters() override {
    qk_.init_parameters();
    init_decay();
  }
  PriorInputs prepare(const at::Tensor& x, const at::Tensor& m, const at::Tensor& mask,
                      const Positions& positions) override {
    auto p = qk_.project(config_, x, m, positions);
    PriorInputs in;
    in.q = apply_feature_map(p.q, config_.feature, config_.eps);
    in.k = apply_feature_map(p.k, config_.feature, config_.eps);
    if (!config_.normalize) in.q = in.q / std::sqrt(static_cast<double>(config_.qk_head_dim));
    if (mask.defined()) in.k = in.k * mask.to(in.k.scalar_type()).view({mask.size(0), mask.size(1), 1, 1});
    in.own["log_decay"] = log_decay(x, modulation_slice(m, 2 * config_.heads * config_.qk_head_dim, decay_width()), mask);
    in.values = p.values;
    in.mask = mask;
    return in;
  }

 protected:
  int64_t feature_dim() const override { return config_.qk_head_dim; }
  at::TensorOptions state_options() const override { return qk_.options(); }

 private:
  QueryKeyProjection qk_;
};

}  // namespace

PriorDeclaration gla_prior() {
  return {.component = PriorDeclarationOf<DecayOptions>{
               .name = "gla",
               .meaning = "linear attention with a data-dependent decay per head",
               .fields = {decay_option_fields()},
               .make = make_prior<GlaPrior, DecayOptions>}
               .erase(),
          .has_query_key = true};
}

}  // namespace seqmix
