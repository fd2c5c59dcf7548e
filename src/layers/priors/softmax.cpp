// The softmax prior: p_t = softmax_j(scale q_t . k_j) over the visible keys (FEM's default prior, and the
// softmax mixer's read). Decoding keeps the keys and values (and, for FEM's padding, which keys are real) in a
// cache. The same key-value machinery serves the attention mixers that read their cache another way (relu,
// light2nd1st): make_key_value_prior with their own read.
#include <cmath>

#include <torch/torch.h>

#include "query_key.h"
#include "seqmix/ops/attention.h"

namespace seqmix {
namespace {

struct SoftmaxCache {
  at::Tensor k, v, mask;  // [B,S,H,dk], [B,S,H,W], [B,S] bool
};

class KeyValuePrior : public PriorImpl {
 public:
  // Without `attend` the read is softmax attention (and FEM's fused softmax read applies); else `attend` is it.
  KeyValuePrior(const PriorConfig& c, torch::nn::Module& home, std::string name, AttendFn attend)
      : PriorImpl(c),
        name_(std::move(name)),
        softmax_(!attend),
        attend_(std::move(attend)),
        scale_(c.score_scale > 0 ? c.score_scale : 1.0 / std::sqrt(static_cast<double>(c.qk_head_dim))) {
    qk_.create(c.layout == QueryKeyLayout::packed ? home : *this, c);
    if (!attend_)
      attend_ = [this](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, const at::Tensor& mask) {
        return ops::attention(q, k, v, {.causal = causal, .scale = scale_, .key_mask = mask, .impl = config_.impl});
      };
  }
  std::string name() const override { return name_; }
  bool supports_bidirectional() const override { return true; }
  int64_t modulation_width() const override { return 2 * config_.heads * config_.qk_head_dim; }
  PriorInputs prepare(const at::Tensor& x, const at::Tensor& m, const at::Tensor& mask,
                      const Positions& positions) override {
    auto p = qk_.project(config_, x, m, positions);
    PriorInputs in;
    in.q = p.q;
    in.k = p.k;
    in.values = p.values;
    in.mask = mask;
    return in;
  }
  at::Tensor read(const at::Tensor& values, const PriorInputs& in) override {
    return attend_(in.q, in.k, values, config_.causal, in.mask);
  }
  std::optional<ops::FemRead> fused_free_energy_read(const at::Tensor& values, const at::Tensor& beta, double cap,
                                                     const PriorInputs& in) override {
    // The one-pass read where auto picks its fused kernel (fem_softmax_read's rule); elsewhere the two streams go
    // through the attention read, PyTorch's kernel on a GPU, as the authors' layer reads them).
    const bool fused = config_.impl == ops::Impl::fused ||
                       (config_.impl == ops::Impl::automatic &&
                        ops::check_impl(ops::Impl::automatic, ops::kFemSoftmaxReadImpls, "fem_softmax_read",
                                        in.q.device()) == ops::Impl::fused);
    if (!softmax_ || !fused || cap <= 0) return std::nullopt;
    const auto r = ops::fem_softmax_read(
        in.q, in.k, values, beta,
        {.cap = cap, .causal = config_.causal, .scale = scale_, .key_mask = in.mask, .impl = ops::Impl::fused});
    return ops::FemRead{r.mean, r.free_energy};
  }
  std::any init_state(int64_t batch, int64_t width) const override {
    const auto opts = qk_.options();
    return SoftmaxCache{at::zeros({batch, 0, config_.heads, config_.qk_head_dim}, opts),
                        at::zeros({batch, 0, config_.heads, width}, opts),
                        at::zeros({batch, 0}, opts.dtype(at::kBool))};
  }
  at::Tensor step(const at::Tensor& values_t, const PriorInputs& in, std::any& state) override {
    return prefill(values_t.unsqueeze(1), in, state).squeeze(1);
  }
  // Appends the block's keys and values to the cache and reads from its queries (the last T of the S keys).
  at::Tensor prefill(const at::Tensor& values, const PriorInputs& in, std::any& state) override {
    auto& cache = state_of<SoftmaxCache>(state);
    cache.k = at::cat({cache.k, in.k}, 1);
    cache.v = at::cat({cache.v, values}, 1);
    if (!config_.cache_mask) return attend_(in.q, cache.k, cache.v, true, {});
    const auto real = in.mask.defined() ? in.mask : at::ones({values.size(0), values.size(1)}, values.options().dtype(at::kBool));
    cache.mask = at::cat({cache.mask, real}, 1);
    return attend_(in.q, cache.k, cache.v, true, cache.mask);
  }
  void rescale(std::any& state, int64_t begin, int64_t end, const at::Tensor& factor) override {
    auto& cache = state_of<SoftmaxCache>(state);
    auto v = cache.v.clone();
    v.narrow(-1, begin, end - begin).mul_(factor.unsqueeze(1));
    cache.v = v;
  }
  void init_parameters() override { qk_.init_parameters(); }

 private:
  std::string name_;
  bool softmax_;
  AttendFn attend_;
  QueryKeyProjection qk_;
  double scale_;
};

}  // namespace

namespace {
Prior make_softmax_prior(const NoOptions&, const PriorConfig& config, torch::nn::Module& home) {
  return std::make_shared<KeyValuePrior>(config, home, "softmax", AttendFn());
}
}  // namespace

PriorDeclaration softmax_prior() {
  return {.component = PriorDeclarationOf<NoOptions>{
               .name = "softmax",
               .meaning = "softmax(q k^T / sqrt(dk)) over the visible keys",
               .make = make_softmax_prior}
               .erase(),
          .has_query_key = true};
}

Prior make_key_value_prior(const PriorConfig& config, torch::nn::Module& home, const std::string& name, AttendFn attend) {
  return std::make_shared<KeyValuePrior>(config, home, name, std::move(attend));
}

}  // namespace seqmix
