// The linear-attention prior: w_tj = phi(q_t) . phi(k_j) with a positive feature map phi (ReLU + eps, or ELU + 1),
// normalised over j <= t (causal) or over all j. FEM's linear prior and the linear mixer's read.
#include "linear_state.h"
#include "query_key.h"

namespace seqmix {
namespace {

class LinearPrior : public LinearStatePrior {
 public:
  LinearPrior(const PriorConfig& c, torch::nn::Module& home) : LinearStatePrior(c) {
    qk_.create(c.layout == QueryKeyLayout::packed ? home : *this, c);
  }
  std::string name() const override { return "linear"; }
  bool supports_bidirectional() const override { return true; }
  bool reads_packed() const override { return true; }
  int64_t modulation_width() const override { return 2 * config_.heads * config_.qk_head_dim; }
  void init_parameters() override { qk_.init_parameters(); }
  PriorInputs prepare(const at::Tensor& x, const at::Tensor& m, const at::Tensor& mask,
                      const Positions& positions) override {
    auto p = qk_.project(config_, x, m, positions);
    PriorInputs in;
    in.q = apply_feature_map(p.q, config_.feature, config_.eps);
    in.k = apply_feature_map(p.k, config_.feature, config_.eps);
    if (mask.defined()) in.k = in.k * mask.to(in.k.scalar_type()).view({mask.size(0), mask.size(1), 1, 1});
    in.values = p.values;
    in.mask = mask;
    return in;
  }
  at::Tensor read(const at::Tensor& values, const PriorInputs& in) override {
    return finish(ops::linear_attention(in.q, in.k, values,
                                        {.causal = config_.causal, .impl = config_.impl, .cu_seqlens = in.cu_seqlens}));
  }
  at::Tensor step(const at::Tensor& values_t, const PriorInputs& in, std::any& state) override {
    auto& s = state_of<ops::LinearAttentionState>(state);
    return finish_step(ops::linear_attention_step(in.q.squeeze(1), in.k.squeeze(1), values_t, s.kv, s.k_sum), s);
  }

 protected:
  int64_t feature_dim() const override { return config_.qk_head_dim; }
  at::TensorOptions state_options() const override { return qk_.options(); }

 private:
  QueryKeyProjection qk_;
};

}  // namespace

PriorDeclaration linear_prior() {
  return {.component = PriorDeclarationOf<NoOptions>{
               .name = "linear",
               .meaning = "normalised linear attention, ReLU + eps features",
               .make = make_prior<LinearPrior, NoOptions>}
               .erase(),
          .has_query_key = true};
}

}  // namespace seqmix
