// The EMA prior: an exponential moving average per head, s_t(i) = gamma_h^(t-i) over the real tokens i <= t,
// normalised by the same recurrence on an all-ones stream (FEM paper §2.3.3: a linear RNN's nonnegative scores,
// normalised as Prop. 2.9 says). Its decay is time-invariant and learned per head, log gamma_h = -softplus(theta_h)
// (plus FEM's conditioner modulation, flag C), the half-lives -ln 2 / log gamma_h starting log-uniformly spread over
// [1, ema_half_life] tokens across the heads (RetNet's multi-scale decays, without queries and keys). It reads through
// GLA's op with unit features, as lrnn_decay does (whose decay is data-dependent). FEM only.
#include <cmath>

#include "decayed_linear.h"

namespace seqmix {
namespace {

struct EmaOptions {
  double ema_half_life = 64.0;  // the slowest head's half-life at initialisation, in tokens
};

class EmaPrior : public DecayedLinearPrior {
 public:
  EmaPrior(const PriorConfig& c, torch::nn::Module&) : DecayedLinearPrior(c) {
    const double slowest = own_options<EmaOptions>(c).ema_half_life;
    // Head h's half-life slowest^(h/(H-1)): 1 token for head 0 ... slowest for the last; softplus(theta) = ln 2 / it.
    const auto h = torch::arange(c.heads, torch::kDouble);
    const auto half_life = c.heads > 1 ? torch::pow(slowest, h / static_cast<double>(c.heads - 1))
                                       : torch::full({1}, slowest, torch::kDouble);
    const auto rate = std::log(2.0) / half_life;
    decay_logit = register_parameter("decay_logit", torch::log(torch::expm1(rate)).to(torch::kFloat));
  }
  std::string name() const override { return "ema"; }
  int64_t modulation_width() const override { return config_.heads; }
  PriorInputs prepare(const at::Tensor& x, const at::Tensor& m, const at::Tensor& mask, const Positions&) override {
    const int64_t B = x.size(0), T = x.size(1), H = config_.heads;
    PriorInputs in;
    in.q = at::ones({B, T, H, 1}, x.options());
    in.k = mask.defined() ? mask.to(x.scalar_type()).view({B, T, 1, 1}).expand_as(in.q).contiguous() : in.q;
    // a_t = log gamma = -softplus(theta (+ modulation)) [B,T,H], 0 at padded positions (no decay across padding).
    auto a = -torch::softplus(plus_modulation(decay_logit.expand({B, T, H}), m));
    if (mask.defined()) a = a * mask.to(a.scalar_type()).unsqueeze(-1);
    in.own["log_decay"] = a;
    in.mask = mask;
    return in;
  }
  at::Tensor decay_logit;  // theta [H]

 protected:
  int64_t feature_dim() const override { return 1; }
  at::TensorOptions state_options() const override { return decay_logit.options(); }
};

}  // namespace

PriorDeclaration ema_prior() {
  return {.component = PriorDeclarationOf<EmaOptions>{
               .name = "ema",
               .meaning = "exponential moving average per head: gamma_h^(t-i), a learned time-invariant decay",
               .fields = {Field<EmaOptions>::real("ema_half_life", &EmaOptions::ema_half_life,
                                                  "ema prior: the slowest head's initial half-life in tokens", 1.0,
                                                  1e6)},
               .make = make_prior<EmaPrior, EmaOptions>}
               .erase(),
          .has_query_key = false};
}

}  // namespace seqmix
