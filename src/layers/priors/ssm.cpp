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

struct SsmPriorState {
  at::Tensor h;  // [B, H*(W+dv), N]: the scan's state for the value streams and the stream of ones
};

class SsmPrior : public PriorImpl {
 public:
  SsmPrior(const PriorConfig& c, torch::nn::Module&) : PriorImpl(c) {
    const int64_t E = c.heads * c.value_head_dim, N = c.ssm_state;
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
    in.delta = split_heads(torch::softplus(plus_modulation(delta_(x), m)), config_.heads);
    if (mask.defined()) in.delta = in.delta * mask.to(in.delta.scalar_type()).view({mask.size(0), mask.size(1), 1, 1});
    in.b = torch::softplus(input_b_(x));
    in.c = torch::softplus(output_c_(x));
    in.mask = mask;
    return in;
  }
  at::Tensor read(const at::Tensor& values, const PriorInputs& in) override {
    const int64_t n = values.size(-1) / config_.value_head_dim, B = values.size(0), T = values.size(1);
    auto ones = torch::ones({B, T, config_.heads, config_.value_head_dim}, values.options());
    if (in.mask.defined()) ones = ones * in.mask.to(ones.scalar_type()).view({B, T, 1, 1});
    // One scan over [values, ones]: the numerator of every stream and the shared normaliser.
    auto u = torch::cat({values, ones}, -1).flatten(2);
    auto delta = tile_streams(in.delta, n + 1).flatten(2);
    const auto type = values.scalar_type();
    const auto A = tiled_A(n + 1).to(type);
    auto y = ops::ssm_scan(u, delta, A, in.b, in.c, config_.impl) + u * tiled_D(n + 1).to(type);
    return normalised(y.view({B, T, config_.heads, (n + 1) * config_.value_head_dim}), n);
  }
  std::any init_state(int64_t batch, int64_t width) const override {
    return SsmPriorState{
        torch::zeros({batch, config_.heads * (width + config_.value_head_dim), config_.ssm_state},
                     recurrent_state_options(A_param.options()))};
  }
  at::Tensor step(const at::Tensor& values_t, const PriorInputs& in, std::any& state) override {
    auto& s = state_of<SsmPriorState>(state);
    const int64_t n = values_t.size(-1) / config_.value_head_dim, B = values_t.size(0);
    auto ones = torch::ones({B, config_.heads, config_.value_head_dim}, values_t.options());
    if (in.mask.defined()) ones = ones * in.mask.to(ones.scalar_type()).view({B, 1, 1});
    auto u = torch::cat({values_t, ones}, -1).flatten(1);
    auto delta = tile_streams(in.delta.squeeze(1), n + 1).flatten(1);
    // A and D in the values' dtype: the step returns the dtype of its first reduced-precision input, and FEM's
    // decode reads the exponential branch in float32.
    const auto type = values_t.scalar_type();
    auto y = ops::ssm_step(u, delta, tiled_A(n + 1).to(type), in.b.squeeze(1), in.c.squeeze(1), s.h) +
             u * tiled_D(n + 1).to(type);
    return normalised(y.view({B, config_.heads, (n + 1) * config_.value_head_dim}), n);
  }
  void rescale(std::any& state, int64_t begin, int64_t end, const at::Tensor& factor) override {
    auto& s = state_of<SsmPriorState>(state);
    auto h = s.h.clone();
    h.view({h.size(0), config_.heads, -1, config_.ssm_state}).narrow(2, begin, end - begin).mul_(factor.unsqueeze(-1));
    s.h = h;
  }
  at::Tensor A_param, D_param;

 private:
  // [..., H, (n+1) dv]: the n numerators over the normaliser (the last dv channels of each head).
  at::Tensor normalised(const at::Tensor& parts, int64_t n) const {
    auto num = parts.narrow(-1, 0, n * config_.value_head_dim);
    auto den = tile_streams(parts.narrow(-1, n * config_.value_head_dim, config_.value_head_dim), n);
    return num / den.clamp_min(config_.floor);
  }
  // A [E,N] -> per head tiled over n streams [H*n*dv, N]
  at::Tensor tiled_A(int64_t n) const {
    auto A = -torch::softplus(A_param).view({config_.heads, config_.value_head_dim, config_.ssm_state});
    return A.repeat({1, n, 1}).flatten(0, 1);
  }
  at::Tensor tiled_D(int64_t n) const {
    return tile_streams(torch::softplus(D_param).view({config_.heads, config_.value_head_dim}), n).flatten();
  }
  torch::nn::Linear delta_{nullptr}, input_b_{nullptr}, output_c_{nullptr};
};

}  // namespace

Prior make_ssm_prior(const PriorConfig& config, torch::nn::Module& home) {
  return std::make_shared<SsmPrior>(config, home);
}

}  // namespace seqmix
