// The selective-SSM prior (Mamba-style, positive impulse response): the scan's impulse response is the weight,
// normalised by the scan of ones (plus the skip D u in both). FEM only; the ssm mixer is a Mamba block with its own
// parameterisation (A = -exp(A_log), unnormalised, gated), which shares the op, not this prior (docs/fem.md).
#include <cmath>

#include <torch/torch.h>

#include "query_key.h"
#include "seqmix/modules/heads.h"
#include "seqmix/ops/ssm.h"

namespace seqmix {
namespace {

struct SsmPriorOptions {
  int64_t ssm_state = 16;  // N, the scan's state size per channel
};

struct SsmPriorState {
  at::Tensor h;  // [B, H*(W+dv), N]: the scan's state for the value streams and the stream of ones
};

class SsmPrior : public PriorImpl {
 public:
  SsmPrior(const PriorConfig& c, torch::nn::Module&) : PriorImpl(c), state_size_(own_options<SsmPriorOptions>(c).ssm_state) {
    const int64_t E = c.heads * c.value_head_dim, N = state_size_;
    delta_ = make_linear(*this, "delta", c.dim, E, true);
    input_b_ = make_linear(*this, "input_b", c.dim, N, c.bias);
    output_c_ = make_linear(*this, "output_c", c.dim, N, c.bias);
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
  PriorInputs prepare(const at::Tensor& x, const at::Tensor& m, const at::Tensor& mask, const Positions&) override {
    PriorInputs in;
    auto delta = split_heads(torch::softplus(plus_modulation(delta_(x), m)), config_.heads);
    if (mask.defined()) delta = delta * mask.to(delta.scalar_type()).view({mask.size(0), mask.size(1), 1, 1});
    in.own["delta"] = delta;
    in.own["b"] = torch::softplus(input_b_(x));
    in.own["c"] = torch::softplus(output_c_(x));
    in.mask = mask;
    return in;
  }
  at::Tensor read(const at::Tensor& values, const PriorInputs& in) override {
    const auto streams = by_stream(values);
    return ops::ssm_normalised_read(streams, parameters(in, 1), config_.floor, config_.impl).view(values.sizes());
  }
  std::any init_state(int64_t batch, int64_t width) const override {
    return SsmPriorState{
        torch::zeros({batch, config_.heads * (width + config_.value_head_dim), state_size_},
                     recurrent_state_options(A_param.options()))};
  }
  at::Tensor step(const at::Tensor& values_t, const PriorInputs& in, std::any& state) override {
    auto& s = state_of<SsmPriorState>(state);
    const auto streams = by_stream(values_t);
    return ops::ssm_normalised_step(streams, parameters(in, 0), config_.floor, s.h).view(values_t.sizes());
  }
  void rescale(std::any& state, int64_t begin, int64_t end, const at::Tensor& factor) override {
    auto& s = state_of<SsmPriorState>(state);
    auto h = s.h.clone();
    h.view({h.size(0), config_.heads, -1, state_size_}).narrow(2, begin, end - begin).mul_(factor.unsqueeze(-1));
    s.h = h;
  }
  at::Tensor A_param, D_param;

 private:
  // values [..., H, n*dv] -> [..., H, n, dv]: the n value streams of each head.
  at::Tensor by_stream(const at::Tensor& values) const {
    auto shape = values.sizes().vec();
    shape.back() = values.size(-1) / config_.value_head_dim;
    shape.push_back(config_.value_head_dim);
    return values.view(shape);
  }
  // The scan's parameters, per channel [..., H*dv]; `time` is 1 for a read [B,T,...], 0 for a step [B,1,...] -> [B,...].
  ops::SsmPriorParameters parameters(const PriorInputs& in, int64_t time) const {
    auto now = [time](const at::Tensor& t) { return time || !t.defined() ? t : t.squeeze(1); };
    const auto delta = now(in.input("delta"));
    return {delta.flatten(delta.dim() - 2), -torch::softplus(A_param), now(in.input("b")), now(in.input("c")),
            torch::softplus(D_param),
            now(in.mask)};
  }
  int64_t state_size_;
  torch::nn::Linear delta_{nullptr}, input_b_{nullptr}, output_c_{nullptr};
};

}  // namespace

PriorDeclaration ssm_prior() {
  return {.component = PriorDeclarationOf<SsmPriorOptions>{
               .name = "ssm",
               .meaning = "selective SSM impulse response, normalised by the scan of ones",
               .fields = {Field<SsmPriorOptions>::integer("ssm_state", &SsmPriorOptions::ssm_state,
                                                          "state size of the ssm prior", 1)},
               .make = make_prior<SsmPrior, SsmPriorOptions>}
               .erase(),
          .has_query_key = false};
}

}  // namespace seqmix
