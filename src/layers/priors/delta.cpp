// The delta-rule prior (DeltaNet): a linear-attention state written by error correction,
// S_t = (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T, read as S_t^T q_t (src/ops/delta/README.md). Queries and
// keys are L2-normalised per head (so each factor I - b k k^T is a contraction), q scaled by 1/sqrt(dk) as in
// DeltaNet, and the write strength is b_t = sigmoid(w . x_t + c) per head, 0 at padded positions (no write).
// The implied weights are signed: the baseline mixer `delta` reads the numerator alone (normalize=false);
// FEM's prior=delta reads numerator / max(normaliser, floor).
#include <cmath>

#include "linear_state.h"
#include "query_key.h"
#include "seqmix/modules/init.h"
#include "seqmix/ops/delta.h"

namespace seqmix {
namespace {

class DeltaPrior : public LinearStatePrior {
 public:
  DeltaPrior(const PriorConfig& c, torch::nn::Module& home) : LinearStatePrior(c) {
    auto& where = c.layout == QueryKeyLayout::packed ? home : *this;
    qk_.create(where, c);
    if (c.layout == QueryKeyLayout::packed)
      write_ = where.register_module("write", torch::nn::Linear(c.dim, c.heads));
    else
      write_ = make_linear(where, "write", c.dim, c.heads, true);
  }
  std::string name() const override { return "delta"; }
  int64_t modulation_width() const override { return 2 * config_.heads * config_.qk_head_dim + config_.heads; }
  void init_parameters() override {
    qk_.init_parameters();
    if (config_.layout == QueryKeyLayout::packed) init_linear(write_);
  }
  PriorInputs prepare(const at::Tensor& x, const at::Tensor& m, const at::Tensor& mask,
                      const Positions& positions) override {
    auto p = qk_.project(config_, x, m, positions);
    PriorInputs in;
    const double eps = 1e-6;  // only an all-zero projection meets it
    in.q = p.q / (p.q.norm(2, {-1}, /*keepdim=*/true).clamp_min(eps) *
                  std::sqrt(static_cast<double>(config_.qk_head_dim)));
    in.k = p.k / p.k.norm(2, {-1}, /*keepdim=*/true).clamp_min(eps);
    auto b = at::sigmoid(plus_modulation(write_(x), modulation_slice(m, 2 * config_.heads * config_.qk_head_dim,
                                                                      config_.heads)));  // [B,T,H]
    if (mask.defined()) b = b * mask.to(b.scalar_type()).unsqueeze(-1);
    in.own["write"] = b;
    in.values = p.values;
    in.mask = mask;
    return in;
  }
  at::Tensor read(const at::Tensor& values, const PriorInputs& in) override {
    return finish(ops::delta_rule(in.q, in.k, values, in.input("write"), {.impl = config_.impl}));
  }
  at::Tensor step(const at::Tensor& values_t, const PriorInputs& in, std::any& state) override {
    auto& s = state_of<ops::LinearAttentionState>(state);
    return finish_step(ops::delta_rule_step(in.q.squeeze(1), in.k.squeeze(1), values_t, in.input("write").squeeze(1),
                                            s.kv, s.k_sum),
                       s);
  }

 protected:
  int64_t feature_dim() const override { return config_.qk_head_dim; }
  at::TensorOptions state_options() const override { return qk_.options(); }

 private:
  QueryKeyProjection qk_;
  torch::nn::Linear write_{nullptr};
};

}  // namespace

PriorDeclaration delta_prior() {
  return {.component = PriorDeclarationOf<NoOptions>{
               .name = "delta",
               .meaning = "the delta rule (DeltaNet), read normalised by its read of ones",
               .make = make_prior<DeltaPrior, NoOptions>}
               .erase(),
          .has_query_key = true,
          .impls = ops::ImplSet{ops::Impl::naive}};
}

}  // namespace seqmix
