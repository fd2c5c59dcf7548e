#include "seqmix/modules/time_decay_conditioner.h"

#include <torch/torch.h>

#include "seqmix/modules/decode_state.h"
#include "seqmix/modules/init.h"
#include "seqmix/ops/gla.h"

namespace seqmix {

TimeDecayConditionerImpl::TimeDecayConditionerImpl(int64_t dim, int64_t hidden, int64_t out_width, ops::Impl impl)
    : hidden_(hidden), impl_(impl) {
  TORCH_CHECK(hidden >= 1 && out_width >= 1, "TimeDecayConditioner: hidden and output widths must be >= 1");
  input_norm = register_module("input_norm", std::make_shared<LayerNormImpl>(dim));
  decay = register_module("decay", torch::nn::Linear(dim, hidden));
  input = register_module("input", torch::nn::Linear(dim, hidden));
  shortcut = register_module("shortcut", torch::nn::Linear(dim, hidden));
  hidden_norm = register_module("hidden_norm", std::make_shared<LayerNormImpl>(hidden));
  output = register_parameter("output", torch::zeros({hidden, out_width}));
  init_linear(decay);
  init_linear(input);
  init_linear(shortcut);
}

TimeDecayConditionerImpl::Terms TimeDecayConditionerImpl::terms(const torch::Tensor& x, const torch::Tensor& mask) {
  auto xn = input_norm->forward(x);
  auto log_decay = -torch::softplus(decay(xn));
  auto u = input(xn);
  if (mask.defined()) {
    auto m = mask.unsqueeze(-1).to(x.scalar_type());
    log_decay = log_decay * m;
    u = u * m;
  }
  return {log_decay, u, torch::softplus(shortcut(xn))};
}

torch::Tensor TimeDecayConditionerImpl::finish(const torch::Tensor& h, const torch::Tensor& gate) {
  auto unit = gate / gate.norm(2, -1, /*keepdim=*/true).clamp_min(1e-8);
  return torch::matmul(torch::silu(unit) * hidden_norm->forward(h), output);
}

torch::Tensor TimeDecayConditionerImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  auto t = terms(x, mask);
  // The recurrence is gated linear attention with unit query/key features, one head per channel.
  auto ones = torch::ones({x.size(0), x.size(1), hidden_, 1}, x.options());
  const auto values = t.u.unsqueeze(-1);
  auto h = ops::gla(ones, ones, values, t.log_decay, {.impl = impl_}).numerator.squeeze(-1);
  return finish(h, t.gate);
}

ops::LinearAttentionState TimeDecayConditionerImpl::init_state(int64_t batch) const {
  const auto options = recurrent_state_options(output.options());
  const auto s = ops::linear_attention_initial_state(
      batch, hidden_, 1, 1, {.dtype = options.dtype().toScalarType(), .device = options.device()});
  return {s.kv, s.k_sum};
}

torch::Tensor TimeDecayConditionerImpl::step(const torch::Tensor& x_t, ops::LinearAttentionState& state,
                                             const torch::Tensor& mask_t) {
  auto t = terms(x_t, mask_t);  // a padded token neither decays nor feeds the state
  auto ones = torch::ones({x_t.size(0), hidden_, 1}, x_t.options());
  const auto r = ops::gla_step(ones, ones, t.u.unsqueeze(-1), t.log_decay, state.kv, state.k_sum);
  state = {r.kv, r.k_sum};
  auto h = r.numerator.squeeze(1).squeeze(-1);
  return finish(h, t.gate);
}

}  // namespace seqmix
