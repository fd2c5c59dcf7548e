// The six FEM priors. Each owns its parameters and reads values through its own op (src/ops).
#include <cmath>

#include <torch/torch.h>

#include "fem_prior.h"
#include "seqmix/io/error.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"
#include "seqmix/modules/rotary.h"
#include "seqmix/ops/aft.h"
#include "seqmix/ops/attention.h"
#include "seqmix/ops/gla.h"
#include "seqmix/ops/linear_attention.h"
#include "seqmix/ops/ssm.h"

namespace seqmix {
namespace {

constexpr double kNormaliserFloor = ops::kPriorNormaliserFloor;

torch::nn::Linear linear(FemPriorImpl& owner, const std::string& name, int64_t in, int64_t out, bool bias) {
  auto l = owner.register_module(name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias)));
  init_linear(l);
  return l;
}

// [..., dv] -> [..., n*dv]: per-channel parameters shared by the n value streams ([v, e] or [v, e, 1]).
torch::Tensor tile(const torch::Tensor& t, int64_t n) {
  std::vector<int64_t> reps(static_cast<size_t>(t.dim()), 1);
  reps.back() = n;
  return n == 1 ? t : t.repeat(reps);
}

torch::Tensor as_float_mask(const torch::Tensor& mask, const torch::Tensor& like) {
  return mask.to(like.scalar_type());
}

// Modulation slice [from, from+width) of the conditioner output, or undefined.
torch::Tensor slice(const torch::Tensor& m, int64_t from, int64_t width) {
  return m.defined() ? m.narrow(-1, from, width) : torch::Tensor();
}

// Additive modulation of a pre-activation (paper H.5: theta~ = theta + G(c)), when present.
torch::Tensor plus_modulation(const torch::Tensor& a, const torch::Tensor& b) { return b.defined() ? a + b : a; }

// Shared query/key parameterisation of the softmax, linear and GLA priors (additive modulation before RoPE).
struct QueryKey {
  torch::nn::Linear query{nullptr}, key{nullptr};
  void create(FemPriorImpl& owner, const FemPriorConfig& c) {
    query = linear(owner, "query", c.dim, c.heads * c.qk_head_dim, c.bias);
    key = linear(owner, "key", c.dim, c.heads * c.qk_head_dim, c.bias);
  }
  std::pair<torch::Tensor, torch::Tensor> project(const FemPriorConfig& c, const torch::Tensor& x,
                                                  const torch::Tensor& modulation, const torch::Tensor& positions) {
    const int64_t w = c.heads * c.qk_head_dim;
    auto q = split_heads(plus_modulation(query(x), slice(modulation, 0, w)), c.heads);
    auto k = split_heads(plus_modulation(key(x), slice(modulation, w, w)), c.heads);
    if (c.rope) {
      q = apply_rotary(q, positions, c.rope_theta);
      k = apply_rotary(k, positions, c.rope_theta);
    }
    return std::make_pair(q, k);
  }
};

// --- softmax -----------------------------------------------------------------------------------

class SoftmaxPrior : public FemPriorImpl {
 public:
  explicit SoftmaxPrior(const FemPriorConfig& c) : FemPriorImpl(c), scale_(1.0 / std::sqrt(double(c.qk_head_dim))) {
    qk_.create(*this, c);
  }
  std::string name() const override { return "softmax"; }
  bool supports_bidirectional() const override { return true; }
  int64_t modulation_width() const override { return 2 * config_.heads * config_.qk_head_dim; }
  PriorInputs prepare(const torch::Tensor& x, const torch::Tensor& m, const torch::Tensor& mask, const torch::Tensor& positions) override {
    PriorInputs in;
    std::tie(in.q, in.k) = qk_.project(config_, x, m, positions);
    in.mask = mask;
    return in;
  }
  torch::Tensor read(const torch::Tensor& values, const PriorInputs& in) override {
    return attend(in.q, in.k, values, config_.causal, in.mask);
  }
  std::optional<ops::FemRead> fused_free_energy_read(const torch::Tensor& values, const torch::Tensor& beta, double cap,
                                                     const PriorInputs& in) override {
    if (config_.impl != ops::Impl::fused || cap <= 0) return std::nullopt;
    return ops::fem_softmax_read_fused(in.q, in.k, values, beta, cap, config_.causal, scale_, in.mask);
  }
  void init_state(DecodeState& s, int64_t batch, int64_t width) const override {
    auto opts = qk_.query->weight.options();
    s["prior.k"] = torch::zeros({batch, 0, config_.heads, config_.qk_head_dim}, opts);
    s["prior.v"] = torch::zeros({batch, 0, config_.heads, width}, opts);
    s["prior.mask"] = torch::zeros({batch, 0}, opts.dtype(torch::kBool));
  }
  torch::Tensor step(const torch::Tensor& values_t, const PriorInputs& in, DecodeState& s) override {
    const int64_t B = values_t.size(0);
    s["prior.k"] = torch::cat({s["prior.k"], in.k}, 1);
    s["prior.v"] = torch::cat({s["prior.v"], values_t.unsqueeze(1)}, 1);
    auto m = in.mask.defined() ? in.mask : torch::ones({B, 1}, values_t.options().dtype(torch::kBool));
    s["prior.mask"] = torch::cat({s["prior.mask"], m}, 1);
    return attend(in.q, s["prior.k"], s["prior.v"], true, s["prior.mask"]).squeeze(1);
  }
  void rescale(DecodeState& s, int64_t begin, int64_t end, const torch::Tensor& factor) override {
    auto v = s["prior.v"].clone();
    v.narrow(-1, begin, end - begin).mul_(factor.unsqueeze(1));
    s["prior.v"] = v;
  }

 private:
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                       const torch::Tensor& mask) const {
    return ops::softmax_attention(q, k, v, causal, scale_, mask, config_.impl);
  }
  QueryKey qk_;
  double scale_;
};

// --- linear attention and GLA (shared state layout) ---------------------------------------------

class LinearStatePrior : public FemPriorImpl {
 public:
  using FemPriorImpl::FemPriorImpl;
  void init_state(DecodeState& s, int64_t batch, int64_t width) const override {
    auto s0 = ops::linear_attention_initial_state(batch, config_.heads, feature_dim(), width, state_options());
    s["prior.kv"] = s0.kv;
    s["prior.k_sum"] = s0.k_sum;
  }
  void rescale(DecodeState& s, int64_t begin, int64_t end, const torch::Tensor& factor) override {
    auto kv = s["prior.kv"].clone();
    kv.narrow(-1, begin, end - begin).mul_(factor.unsqueeze(2));
    s["prior.kv"] = kv;
  }

 protected:
  virtual int64_t feature_dim() const = 0;
  virtual torch::TensorOptions state_options() const = 0;
  torch::Tensor normalised(const ops::PriorRead& r) const { return ops::normalised_read(r, kNormaliserFloor); }
};

class LinearPrior : public LinearStatePrior {
 public:
  explicit LinearPrior(const FemPriorConfig& c) : LinearStatePrior(c) { qk_.create(*this, c); }
  std::string name() const override { return "linear"; }
  bool supports_bidirectional() const override { return true; }
  int64_t modulation_width() const override { return 2 * config_.heads * config_.qk_head_dim; }
  PriorInputs prepare(const torch::Tensor& x, const torch::Tensor& m, const torch::Tensor& mask, const torch::Tensor& positions) override {
    PriorInputs in;
    auto [q, k] = qk_.project(config_, x, m, positions);
    in.q = torch::relu(q) + config_.eps;
    in.k = torch::relu(k) + config_.eps;
    if (mask.defined()) in.k = in.k * as_float_mask(mask, in.k).view({mask.size(0), mask.size(1), 1, 1});
    in.mask = mask;
    return in;
  }
  torch::Tensor read(const torch::Tensor& values, const PriorInputs& in) override {
    return normalised(ops::linear_attention(in.q, in.k, values, config_.causal, config_.impl));
  }
  torch::Tensor step(const torch::Tensor& values_t, const PriorInputs& in, DecodeState& s) override {
    ops::LinearAttentionState st{s["prior.kv"], s["prior.k_sum"]};
    auto r = ops::linear_attention_step(in.q.squeeze(1), in.k.squeeze(1), values_t, st);
    s["prior.kv"] = st.kv;
    s["prior.k_sum"] = st.k_sum;
    return normalised(r).squeeze(1);
  }

 protected:
  int64_t feature_dim() const override { return config_.qk_head_dim; }
  torch::TensorOptions state_options() const override { return qk_.query->weight.options(); }

 private:
  QueryKey qk_;
};

ops::PriorRead gla_read(const FemPriorConfig& c, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& log_decay) {
  return ops::gla(q, k, v, log_decay, c.impl);
}

// Log decay a_t = logsigmoid(w.x + b + modulation) / gate_normalizer per head, 0 at padded positions.
torch::Tensor head_log_decay(torch::nn::Linear& decay, const FemPriorConfig& c, const torch::Tensor& x,
                             const torch::Tensor& modulation, const torch::Tensor& mask) {
  auto a = torch::log_sigmoid(plus_modulation(decay(x), modulation)) / c.gate_normalizer;
  return mask.defined() ? a * as_float_mask(mask, a).unsqueeze(-1) : a;
}

// The priors read through GLA's op (decayed linear state): gla and lrnn_decay differ in their inputs only.
class DecayedLinearPrior : public LinearStatePrior {
 public:
  using LinearStatePrior::LinearStatePrior;
  torch::Tensor read(const torch::Tensor& values, const PriorInputs& in) override {
    return normalised(gla_read(config_, in.q, in.k, values, in.log_decay));
  }
  torch::Tensor step(const torch::Tensor& values_t, const PriorInputs& in, DecodeState& s) override {
    ops::LinearAttentionState st{s["prior.kv"], s["prior.k_sum"]};
    auto r = ops::gla_step(in.q.squeeze(1), in.k.squeeze(1), values_t, in.log_decay.squeeze(1), st);
    s["prior.kv"] = st.kv;
    s["prior.k_sum"] = st.k_sum;
    return normalised(r).squeeze(1);
  }
};

class GlaPrior : public DecayedLinearPrior {
 public:
  explicit GlaPrior(const FemPriorConfig& c) : DecayedLinearPrior(c) {
    qk_.create(*this, c);
    decay_ = linear(*this, "decay", c.dim, c.heads, true);
  }
  std::string name() const override { return "gla"; }
  int64_t modulation_width() const override { return 2 * config_.heads * config_.qk_head_dim + config_.heads; }
  PriorInputs prepare(const torch::Tensor& x, const torch::Tensor& m, const torch::Tensor& mask, const torch::Tensor& positions) override {
    PriorInputs in;
    auto [q, k] = qk_.project(config_, x, m, positions);
    in.q = torch::relu(q) + config_.eps;
    in.k = torch::relu(k) + config_.eps;
    if (mask.defined()) in.k = in.k * as_float_mask(mask, in.k).view({mask.size(0), mask.size(1), 1, 1});
    in.log_decay = head_log_decay(decay_, config_, x, slice(m, 2 * config_.heads * config_.qk_head_dim, config_.heads), mask);
    in.mask = mask;
    return in;
  }

 protected:
  int64_t feature_dim() const override { return config_.qk_head_dim; }
  torch::TensorOptions state_options() const override { return qk_.query->weight.options(); }

 private:
  QueryKey qk_;
  torch::nn::Linear decay_{nullptr};
};

// LRNN-decay: s_t(i) = exp(sum_{r=i+1..t} a_r), the decay of GLA without features: GLA's op with unit
// query/key features (a zero key at padded positions).
class LrnnDecayPrior : public DecayedLinearPrior {
 public:
  explicit LrnnDecayPrior(const FemPriorConfig& c) : DecayedLinearPrior(c) {
    decay_ = linear(*this, "decay", c.dim, c.heads, true);
  }
  std::string name() const override { return "lrnn_decay"; }
  int64_t modulation_width() const override { return config_.heads; }
  PriorInputs prepare(const torch::Tensor& x, const torch::Tensor& m, const torch::Tensor& mask, const torch::Tensor& positions) override {
    PriorInputs in;
    in.q = torch::ones({x.size(0), x.size(1), config_.heads, 1}, x.options());
    in.k = mask.defined() ? as_float_mask(mask, x).view({x.size(0), x.size(1), 1, 1}).expand_as(in.q).contiguous() : in.q;
    in.log_decay = head_log_decay(decay_, config_, x, m, mask);
    in.mask = mask;
    return in;
  }

 protected:
  int64_t feature_dim() const override { return 1; }
  torch::TensorOptions state_options() const override { return decay_->weight.options(); }

 private:
  torch::nn::Linear decay_{nullptr};
};

// --- AFT / LRNN-softmax: per-channel key logits -------------------------------------------------

class AftPrior : public FemPriorImpl {
 public:
  explicit AftPrior(const FemPriorConfig& c) : FemPriorImpl(c) {
    keys_ = linear(*this, "keys", c.dim, c.heads * c.value_head_dim, c.bias);
  }
  std::string name() const override { return "aft"; }
  int64_t modulation_width() const override { return config_.heads * config_.value_head_dim; }
  PriorInputs prepare(const torch::Tensor& x, const torch::Tensor& m, const torch::Tensor& mask, const torch::Tensor&) override {
    PriorInputs in;
    in.keys = split_heads(plus_modulation(keys_(x), m), config_.heads);
    in.mask = mask;
    return in;
  }
  torch::Tensor read(const torch::Tensor& values, const PriorInputs& in) override {
    const int64_t n = values.size(-1) / config_.value_head_dim;
    const auto keys = tile(in.keys, n).flatten(2), flat = values.flatten(2);
    auto r = ops::aft(keys, flat, in.mask, config_.impl);
    return ops::normalised_read(r, kNormaliserFloor).view(values.sizes());
  }
  void init_state(DecodeState& s, int64_t batch, int64_t width) const override {
    auto s0 = ops::aft_initial_state(batch, config_.heads * width, keys_->weight.options());
    s["prior.numerator"] = s0.numerator;
    s["prior.normaliser"] = s0.normaliser;
    s["prior.key_max"] = s0.key_max;
  }
  torch::Tensor step(const torch::Tensor& values_t, const PriorInputs& in, DecodeState& s) override {
    const int64_t n = values_t.size(-1) / config_.value_head_dim;
    ops::AftState st{s["prior.numerator"], s["prior.normaliser"], s["prior.key_max"]};
    auto r = ops::aft_step(tile(in.keys.squeeze(1), n).flatten(1), values_t.flatten(1), st,
                           in.mask.defined() ? in.mask.squeeze(1) : torch::Tensor());
    s["prior.numerator"] = st.numerator;
    s["prior.normaliser"] = st.normaliser;
    s["prior.key_max"] = st.key_max;
    return ops::normalised_read(r, kNormaliserFloor).squeeze(1).view(values_t.sizes());
  }
  void rescale(DecodeState& s, int64_t begin, int64_t end, const torch::Tensor& factor) override {
    auto num = s["prior.numerator"].clone();
    const int64_t B = num.size(0);
    num.view({B, config_.heads, -1}).narrow(-1, begin, end - begin).mul_(factor);
    s["prior.numerator"] = num;
  }

 private:
  torch::nn::Linear keys_{nullptr};
};

// --- positive-impulse SSM (Mamba-style), normalised by the scan of ones -------------------------

class SsmPrior : public FemPriorImpl {
 public:
  explicit SsmPrior(const FemPriorConfig& c) : FemPriorImpl(c) {
    const int64_t E = c.heads * c.value_head_dim, N = c.ssm_state;
    delta_ = linear(*this, "delta", c.dim, E, true);
    input_b_ = linear(*this, "input_b", c.dim, N, c.bias);
    output_c_ = linear(*this, "output_c", c.dim, N, c.bias);
    torch::NoGradGuard no_grad;
    // Step sizes start log-uniform in [1e-3, 0.1]; A = -softplus(A_param) starts at -(1..N); D = softplus(.) at 1.
    auto dt = torch::exp(torch::rand({E}) * (std::log(0.1) - std::log(1e-3)) + std::log(1e-3));
    delta_->bias.copy_(dt + torch::log(-torch::expm1(-dt)));
    auto a = torch::arange(1, N + 1, torch::kFloat).repeat({E, 1});
    A_param = register_parameter("A_param", a + torch::log(-torch::expm1(-a)));
    D_param = register_parameter("D_param", torch::full({E}, std::log(std::exp(1.0) - 1.0)));
  }
  std::string name() const override { return "ssm"; }
  int64_t modulation_width() const override { return config_.heads * config_.value_head_dim; }
  PriorInputs prepare(const torch::Tensor& x, const torch::Tensor& m, const torch::Tensor& mask, const torch::Tensor&) override {
    PriorInputs in;
    in.delta = split_heads(torch::softplus(plus_modulation(delta_(x), m)), config_.heads);
    if (mask.defined()) in.delta = in.delta * as_float_mask(mask, in.delta).view({mask.size(0), mask.size(1), 1, 1});
    in.b = torch::softplus(input_b_(x));
    in.c = torch::softplus(output_c_(x));
    in.mask = mask;
    return in;
  }
  torch::Tensor read(const torch::Tensor& values, const PriorInputs& in) override {
    const int64_t n = values.size(-1) / config_.value_head_dim, B = values.size(0), T = values.size(1);
    auto ones = torch::ones({B, T, config_.heads, config_.value_head_dim}, values.options());
    if (in.mask.defined()) ones = ones * as_float_mask(in.mask, ones).view({B, T, 1, 1});
    // One scan over [values, ones]: the numerator of every stream and the shared normaliser.
    auto u = torch::cat({values, ones}, -1).flatten(2);
    auto delta = tile(in.delta, n + 1).flatten(2);
    const auto type = values.scalar_type();
    const auto A = tiled_A(n + 1).to(type);
    auto y = ops::ssm_scan(u, delta, A, in.b, in.c, config_.impl) + u * tiled_D(n + 1).to(type);
    auto parts = y.view({B, T, config_.heads, (n + 1) * config_.value_head_dim});
    auto num = parts.narrow(-1, 0, n * config_.value_head_dim);
    auto den = tile(parts.narrow(-1, n * config_.value_head_dim, config_.value_head_dim), n);
    return num / den.clamp_min(kNormaliserFloor);
  }
  void init_state(DecodeState& s, int64_t batch, int64_t width) const override {
    s["prior.h"] = torch::zeros({batch, config_.heads * (width + config_.value_head_dim), config_.ssm_state},
                                A_param.options());
  }
  torch::Tensor step(const torch::Tensor& values_t, const PriorInputs& in, DecodeState& s) override {
    const int64_t n = values_t.size(-1) / config_.value_head_dim, B = values_t.size(0);
    auto ones = torch::ones({B, config_.heads, config_.value_head_dim}, values_t.options());
    if (in.mask.defined()) ones = ones * as_float_mask(in.mask, ones).view({B, 1, 1});
    auto u = torch::cat({values_t, ones}, -1).flatten(1);
    auto delta = tile(in.delta.squeeze(1), n + 1).flatten(1);
    auto y = ops::ssm_step(u, delta, tiled_A(n + 1), in.b.squeeze(1), in.c.squeeze(1), s["prior.h"]) + u * tiled_D(n + 1);
    auto parts = y.view({B, config_.heads, (n + 1) * config_.value_head_dim});
    auto num = parts.narrow(-1, 0, n * config_.value_head_dim);
    auto den = tile(parts.narrow(-1, n * config_.value_head_dim, config_.value_head_dim), n);
    return num / den.clamp_min(kNormaliserFloor);
  }
  void rescale(DecodeState& s, int64_t begin, int64_t end, const torch::Tensor& factor) override {
    auto h = s["prior.h"].clone();
    const int64_t B = h.size(0);
    h.view({B, config_.heads, -1, config_.ssm_state}).narrow(2, begin, end - begin).mul_(factor.unsqueeze(-1));
    s["prior.h"] = h;
  }
  torch::Tensor A_param, D_param;

 private:
  // A [E,N] -> per head tiled over n streams [H*n*dv, N]
  torch::Tensor tiled_A(int64_t n) const {
    auto A = -torch::softplus(A_param).view({config_.heads, config_.value_head_dim, config_.ssm_state});
    return A.repeat({1, n, 1}).flatten(0, 1);
  }
  torch::Tensor tiled_D(int64_t n) const {
    return tile(torch::softplus(D_param).view({config_.heads, config_.value_head_dim}), n).flatten();
  }
  torch::nn::Linear delta_{nullptr}, input_b_{nullptr}, output_c_{nullptr};
};

}  // namespace

PriorInputs PriorInputs::to(at::ScalarType type) const {
  auto cast = [type](const torch::Tensor& t) { return t.defined() ? t.to(type) : t; };
  return {cast(q), cast(k), cast(log_decay), cast(keys), cast(delta), cast(b), cast(c), mask};
}

const std::vector<std::string>& fem_prior_names() {
  static const std::vector<std::string> names = {"softmax", "linear", "gla", "aft", "lrnn_decay", "ssm"};
  return names;
}

bool fem_prior_has_qk(const std::string& name) { return name == "softmax" || name == "linear" || name == "gla"; }

FemPrior make_fem_prior(const std::string& name, const FemPriorConfig& c) {
  if (name == "softmax") return std::make_shared<SoftmaxPrior>(c);
  if (name == "linear") return std::make_shared<LinearPrior>(c);
  if (name == "gla") return std::make_shared<GlaPrior>(c);
  if (name == "aft") return std::make_shared<AftPrior>(c);
  if (name == "lrnn_decay") return std::make_shared<LrnnDecayPrior>(c);
  if (name == "ssm") return std::make_shared<SsmPrior>(c);
  throw Error("unknown FEM prior '" + name + "'; valid priors: softmax, linear, gla, aft, lrnn_decay, ssm");
}

}  // namespace seqmix
