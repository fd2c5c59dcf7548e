// The LRNN-decay prior: s_t(i) = exp(sum_{r=i+1..t} a_r), the decay of GLA without features: GLA's op with unit
// query/key features (a zero key at padded positions). FEM only.
#include "decayed_linear.h"

namespace seqmix {
namespace {

class LrnnDecayPrior : public DecayedLinearPrior {
 public:
  LrnnDecayPrior(const PriorConfig& c, torch::nn::Module& home) : DecayedLinearPrior(c, own_options<DecayOptions>(c)) { create_decay(*this); }
  std::string name() const override { return "lrnn_decay"; }
  int64_t modulation_width() const override { return config_.heads; }
  PriorInputs prepare(const at::Tensor& x, const at::Tensor& m, const at::Tensor& mask, const Positions&) override {
    PriorInputs in;
    in.q = at::ones({x.size(0), x.size(1), config_.heads, 1}, x.options());
    in.k = mask.defined() ? mask.to(x.scalar_type()).view({x.size(0), x.size(1), 1, 1}).expand_as(in.q).contiguous()
                          : in.q;
    in.own["log_decay"] = log_decay(x, m, mask);
    in.mask = mask;
    return in;
  }

 protected:
  int64_t feature_dim() const override { return 1; }
  at::TensorOptions state_options() const override { return decay_->weight.options(); }
};

}  // namespace

PriorDeclaration lrnn_decay_prior() {
  return {.component = PriorDeclarationOf<DecayOptions>{
               .name = "lrnn_decay",
               .meaning = "the decay of GLA alone: exp(sum of per-head log decays)",
               .fields = {decay_option_fields()},
               .make = make_prior<LrnnDecayPrior, DecayOptions>}
               .erase(),
          .has_query_key = false};
}

}  // namespace seqmix
