#include "seqmix/layers/selective_ssm.h"

#include "seqmix/layers/mixer_spec.h"

#include <cmath>

#include <torch/torch.h>

#include "seqmix/io/error.h"
#include "seqmix/modules/init.h"
#include "seqmix/ops/ssm.h"

namespace seqmix {

SelectiveSSMImpl::SelectiveSSMImpl(const SelectiveSSMOptions& options)
    : MixerImpl("ssm", options.dim, /*causal=*/true), options_(options) {
  if (options.expand < 1 || options.state < 1 || options.conv < 0)
    throw Error("mixer ssm: expand and state must be >= 1 and conv >= 0");
  if (!(options.dt_min > 0 && options.dt_max >= options.dt_min))
    throw Error("mixer ssm: need 0 < dt_min <= dt_max");
  inner_ = options.expand * options.dim;
  dt_rank_ = options.dt_rank > 0 ? options.dt_rank : (options.dim + 15) / 16;
  const int64_t N = options.state;
  in_proj = register_module("in_proj", torch::nn::Linear(torch::nn::LinearOptions(options.dim, 2 * inner_).bias(false)));
  x_proj = register_module("x_proj", torch::nn::Linear(torch::nn::LinearOptions(inner_, dt_rank_ + 2 * N).bias(false)));
  dt_proj = register_module("dt_proj", torch::nn::Linear(torch::nn::LinearOptions(dt_rank_, inner_)));
  out_proj = register_module("out_proj", torch::nn::Linear(torch::nn::LinearOptions(inner_, options.dim).bias(false)));
  init_linear(in_proj);
  init_linear(x_proj);
  init_linear(out_proj);
  {
    torch::NoGradGuard no_grad;
    const double bound = 1.0 / std::sqrt(static_cast<double>(dt_rank_));
    dt_proj->weight.uniform_(-bound, bound);
    // Bias = softplus^-1(dt) with dt log-uniform in [dt_min, dt_max], so delta starts in that range.
    auto dt = torch::exp(torch::rand({inner_}) * (std::log(options.dt_max) - std::log(options.dt_min)) +
                         std::log(options.dt_min));
    dt_proj->bias.copy_(dt + torch::log(-torch::expm1(-dt)));
  }
  if (options.conv > 0) conv = register_module("conv", CausalDepthwiseConv(inner_, options.conv));
  // S4D-real initialisation: A = -(1, 2, ..., N) for every channel.
  A_log = register_parameter("A_log", torch::log(torch::arange(1, N + 1, torch::kFloat)).repeat({inner_, 1}));
  D_skip = register_parameter("D_skip", torch::ones({inner_}));
}

SelectiveSSMImpl::Selective SelectiveSSMImpl::select(torch::Tensor u, torch::Tensor z) {
  u = torch::silu(u);
  auto proj = x_proj(u);
  auto parts = proj.split({dt_rank_, options_.state, options_.state}, -1);
  return {u, z, torch::softplus(dt_proj(parts[0])), torch::softplus(parts[1]), torch::softplus(parts[2])};
}

torch::Tensor SelectiveSSMImpl::finish(const Selective& s, const torch::Tensor& y) {
  return out_proj((y + D_skip * s.u) * torch::silu(s.z));
}

torch::Tensor SelectiveSSMImpl::forward(const torch::Tensor& x) {
  check_input(x);
  auto uz = in_proj(x).chunk(2, -1);
  auto u = options_.conv > 0 ? conv(uz[0]) : uz[0];
  auto s = select(u, uz[1]);
  auto y = ops::ssm_scan(s.u, s.delta, -torch::exp(A_log), s.b, s.c, {.impl = options_.impl}).y;
  return finish(s, y);
}

namespace {
struct SsmState {
  torch::Tensor h;     // [B,E,N] the scan's state
  torch::Tensor conv;  // the short conv's window (conv > 0)
};
}  // namespace

DecodeState SelectiveSSMImpl::init_state(int64_t batch) const {
  SsmState s{torch::zeros({batch, inner_, options_.state}, recurrent_state_options(A_log.options())), {}};
  if (options_.conv > 0) s.conv = conv->initial_window(batch);
  return DecodeState::of(std::move(s));
}

torch::Tensor SelectiveSSMImpl::step(const torch::Tensor& x_t, DecodeState& state) {
  check_step_input(x_t);
  auto& st = state.as<SsmState>(kind());
  auto uz = in_proj(x_t).chunk(2, -1);
  auto u = options_.conv > 0 ? conv->step(uz[0], st.conv) : uz[0];
  auto s = select(u, uz[1]);
  const auto r = ops::ssm_step(s.u, s.delta, -torch::exp(A_log), s.b, s.c, st.h);
  st.h = r.state;
  const auto& y = r.y;
  state.position += 1;
  return finish(s, y);
}

namespace {
}  // namespace

const MixerDeclaration& ssm_mixer_declaration() {
  using O = SelectiveSSMOptions;
  static const MixerDeclaration declaration =
      MixerDeclarationOf<O>{
          .name = "ssm",
          .meaning = "diagonal selective SSM, Mamba-style, with a positive impulse response (causal)",
          .fields = {Field<O>::integer("expand", &O::expand, "inner channels = expand * width", 1, 16),
                     Field<O>::integer("state", &O::state, "state size per channel", 1),
                     Field<O>::integer("conv", &O::conv, "kernel of the short causal conv (0 = none)", 0, 64),
                     Field<O>::integer("dt_rank", &O::dt_rank, "rank of the step-size projection (0 = ceil(width/16))", 0),
                     Field<O>::real("dt_min", &O::dt_min, "smallest initial step size", 1e-8),
                     Field<O>::real("dt_max", &O::dt_max, "largest initial step size", 1e-8),
                     Field<O>::impl(&O::impl, ops::kSsmScanImpls, "fused kernel or its naive (materialised) twin")},
          .make = make_layer<SelectiveSSMImpl, O>}
          .erase();
  return declaration;
}

}  // namespace seqmix
