// The AFT / LRNN-softmax prior: per-channel key logits k_i, w_ti = exp(k_i) over i <= t, stabilised with the
// causal running max of the keys (paper App. H.3). FEM only.
#include <torch/torch.h>

#include "query_key.h"
#include "seqmix/modules/heads.h"
#include "seqmix/ops/aft.h"

namespace seqmix {
namespace {

class AftPrior : public PriorImpl {
 public:
  AftPrior(const PriorConfig& c, torch::nn::Module&) : PriorImpl(c) {
    keys_ = make_linear(*this, "keys", c.dim, c.heads * c.value_head_dim, c.bias);
  }
  std::string name() const override { return "aft"; }
  int64_t modulation_width() const override { return config_.heads * config_.value_head_dim; }
  PriorInputs prepare(const at::Tensor& x, const at::Tensor& m, const at::Tensor& mask, const Positions&) override {
    PriorInputs in;
    in.own["keys"] = split_heads(plus_modulation(keys_(x), m), config_.heads);
    in.mask = mask;
    return in;
  }
  at::Tensor read(const at::Tensor& values, const PriorInputs& in) override {
    const int64_t n = values.size(-1) / config_.value_head_dim;
    const auto keys = tile_streams(in.input("keys"), n).flatten(2), flat = values.flatten(2);
    const auto r = ops::aft(keys, flat, {.mask = in.mask, .impl = config_.impl});
    return ops::normalised_read(r.numerator, r.normaliser, config_.floor).view(values.sizes());
  }
  std::any init_state(int64_t batch, int64_t width) const override {
    const auto options = recurrent_state_options(keys_->weight.options());
    const auto s = ops::aft_initial_state(batch, config_.heads * width,
                                          {.dtype = options.dtype().toScalarType(), .device = options.device()});
    return ops::AftState{s.state_numerator, s.state_normaliser, s.key_max};
  }
  at::Tensor step(const at::Tensor& values_t, const PriorInputs& in, std::any& state) override {
    const int64_t n = values_t.size(-1) / config_.value_head_dim;
    auto& s = state_of<ops::AftState>(state);
    const auto r = ops::aft_step(tile_streams(in.input("keys").squeeze(1), n).flatten(1), values_t.flatten(1),
                                 s.numerator, s.normaliser, s.key_max,
                                 {.mask_t = in.mask.defined() ? in.mask.squeeze(1) : at::Tensor()});
    s = {r.state_numerator, r.state_normaliser, r.key_max};
    return ops::normalised_read(r.numerator, r.normaliser, config_.floor).squeeze(1).view(values_t.sizes());
  }
  void rescale(std::any& state, int64_t begin, int64_t end, const at::Tensor& factor) override {
    auto& s = state_of<ops::AftState>(state);
    auto num = s.numerator.clone();
    num.view({num.size(0), config_.heads, -1}).narrow(-1, begin, end - begin).mul_(factor);
    s.numerator = num;
  }

 private:
  torch::nn::Linear keys_{nullptr};
};

}  // namespace

PriorDeclaration aft_prior() {
  return {.component = PriorDeclarationOf<NoOptions>{
               .name = "aft",
               .meaning = "AFT / LRNN-softmax: exp(per-channel key logits), causal running max",
               .make = make_prior<AftPrior, NoOptions>}
               .erase(),
          .has_query_key = false};
}

}  // namespace seqmix
