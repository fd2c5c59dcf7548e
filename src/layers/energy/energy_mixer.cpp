#include "seqmix/layers/energy_mixer.h"

#include "seqmix/layers/mixer_spec.h"

#include <torch/torch.h>

#include <cmath>

#include "seqmix/io/error.h"
#include "seqmix/io/spec.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"
#include "seqmix/ops/attention.h"
#include "seqmix/ops/second_order.h"
#include "../../ops/common/padding.h"  // causal_outputs: non-finite tokens stay causal
#include "query_preimage.h"

namespace seqmix {
namespace {

const std::vector<std::string> kLocal = {"abs_inner", "neg_inner", "half_sq_distance", "lp", "huber"};
const std::vector<std::string> kGlobal = {"neg_sum_squares", "gated_sum_squares", "helmholtz"};
const std::vector<std::string> kOptimizer = {"gd", "momentum", "nesterov", "newton", "newton_taylor"};

void check_choice(const std::string& what, const std::string& value, const std::vector<std::string>& valid) {
  if (std::find(valid.begin(), valid.end(), value) == valid.end())
    throw Error("mixer energy: unknown " + what + " '" + value + "'; valid: " + join(valid));
}

constexpr double kGateBias = 3.0;  // gated_sum_squares: sigmoid(3) = 0.95 per step at init

}  // namespace

EnergyMixerImpl::EnergyMixerImpl(const EnergyMixerOptions& o) : MixerImpl("energy", o.dim, true), options_(o) {
  check_choice("local energy", o.local, kLocal);
  check_choice("global energy", o.global, kGlobal);
  check_choice("optimizer", o.optimizer, kOptimizer);
  if (o.heads <= 0 || o.dim % o.heads != 0)
    throw Error("mixer energy: width " + std::to_string(o.dim) + " is not divisible by heads=" + std::to_string(o.heads));
  if (o.steps < 1) throw Error("mixer energy: steps must be >= 1");
  if (o.optimizer == "newton_taylor" && (o.global != "helmholtz" || o.local != "half_sq_distance"))
    throw Error("mixer energy: optimizer=newton_taylor is derived for global=helmholtz with local=half_sq_distance "
                "(the MHA2nd1st recipe); use optimizer=newton for other energies");
  if (o.local == "lp" && o.p < 1.0) throw Error("mixer energy: lp needs p >= 1");
  head_dim_ = o.dim / o.heads;
  temperature_ = o.temperature > 0 ? o.temperature : std::sqrt(static_cast<double>(head_dim_));
  w1 = register_module("w1", torch::nn::Linear(torch::nn::LinearOptions(o.dim, o.dim).bias(false)));
  w2 = register_module("w2", torch::nn::Linear(torch::nn::LinearOptions(o.dim, o.dim).bias(false)));
  init_linear(w1);
  init_linear(w2);
  if (o.global == "gated_sum_squares") {
    gate = register_module("gate", torch::nn::Linear(o.dim, o.heads));
    init_linear(gate);
    torch::NoGradGuard no_grad;
    gate->bias.fill_(kGateBias);
  }
}

torch::Tensor EnergyMixerImpl::energy(const torch::Tensor& z, const torch::Tensor& h, bool per_head) {
  const int64_t T = z.size(1), S = h.size(1);
  // z is held in float32 at least (update); the projection reads it in the weights' dtype.
  auto q = split_heads(w1(z.to(w1->weight.scalar_type())), options_.heads).transpose(1, 2);  // [B,H,T,dh]
  auto k = split_heads(w2(h), options_.heads).transpose(1, 2);  // [B,H,S,dh]
  const std::string& local = options_.local;
  torch::Tensor E;  // [B,H,T,S]
  if (local == "abs_inner" || local == "neg_inner") {
    auto inner = torch::matmul(q, k.transpose(-1, -2));
    E = local == "abs_inner" ? inner.abs() : -inner;
  } else {
    auto diff = q.unsqueeze(3) - k.unsqueeze(2);  // [B,H,T,S,dh]
    auto squared = diff.square().sum(-1);
    if (local == "half_sq_distance") {
      E = 0.5 * squared;
    } else if (local == "lp") {
      E = diff.abs().pow(options_.p).sum(-1);
    } else {  // huber; the norm is floored so the unused branch has a finite gradient at r = 0
      const double delta = options_.delta;
      auto r = squared.clamp_min(1e-30).sqrt();
      E = torch::where(r <= delta, 0.5 * squared, delta * (r - 0.5 * delta));
    }
  }
  const auto visible = ops::visible_keys(T, S, /*causal=*/true, {}, z.device());  // [1,1,T,S]
  const double temp = temperature_;
  torch::Tensor F;  // [B,H,T]
  if (options_.global == "helmholtz") {
    F = -temp * torch::logsumexp((-E / temp).masked_fill(visible.logical_not(), -INFINITY), -1);
  } else {
    auto weight = visible.to(E.scalar_type());
    if (options_.global == "gated_sum_squares") {
      // gamma_{t,i} = exp(c_t - c_i), c the running sum of logsigmoid(gate(h_r)) (per head).
      auto c = torch::log_sigmoid(gate(h)).transpose(1, 2).cumsum(-1);  // [B,H,S]
      auto query_c = c.narrow(-1, S - T, T).unsqueeze(-1);               // [B,H,T,1]
      weight = torch::exp((query_c - c.unsqueeze(-2)).clamp_max(0)) * weight;
    }
    F = -0.5 * temp * (weight * E.square()).sum(-1);
  }
  return per_head ? F.transpose(1, 2) : F.mean(1);
}

torch::Tensor EnergyMixerImpl::gradient(const torch::Tensor& z, const torch::Tensor& h, bool create_graph) {
  // Each token's energy depends on its own z only, so the gradient of the sum is the per-token gradient.
  return torch::autograd::grad({energy(z, h).sum()}, {z}, {}, /*retain_graph=*/true, create_graph)[0];
}

torch::Tensor EnergyMixerImpl::newton_direction(const torch::Tensor& z, const torch::Tensor& h, bool create_graph) {
  if (create_graph)
    throw Error("mixer energy: optimizer=newton has no stable backward (the pseudo-inverse of a singular Hessian); "
                "run it without gradients (analysis, decoding) or train with optimizer=newton_taylor");
  auto F = energy(z, h, /*per_head=*/true);  // [B,T,H]
  const int64_t D = z.size(2);
  torch::Tensor direction = torch::zeros_like(z);
  for (int64_t head = 0; head < options_.heads; ++head) {
    auto g = torch::autograd::grad({F.select(-1, head).sum()}, {z}, {}, true, true)[0];  // [B,T,D]
    std::vector<torch::Tensor> rows;
    for (int64_t i = 0; i < D; ++i)
      rows.push_back(torch::autograd::grad({g.select(-1, i).sum()}, {z}, {}, true, false)[0]);
    auto hessian = torch::stack(rows, -2).detach();  // [B,T,D,D], symmetric
    auto pinv = at::linalg_pinv(hessian, /*rcond=*/1e-10, /*hermitian=*/true);
    direction = direction + torch::matmul(pinv, g.detach().unsqueeze(-1)).squeeze(-1);
  }
  return direction / static_cast<double>(options_.heads);
}

torch::Tensor EnergyMixerImpl::taylor_direction(const torch::Tensor& z, const torch::Tensor& h) {
  // H_h^+ g_h = M_h A_h^-1 u_h with A_h = I - Cov_p(k)/T; first order: M_h (u + Cov u / T) (the MHA2nd1st read
  // with c = 1/T), M_h = W1,h^T (W1,h W1,h^T)^-1.
  const int64_t H = options_.heads, dh = head_dim_, D = options_.dim;
  auto q = split_heads(w1(z.to(w1->weight.scalar_type())), H), k = split_heads(w2(h), H);
  auto temps = torch::full({H}, temperature_, z.options());
  auto read = ops::mha2nd1st_read(q, k, temps, temps.reciprocal(), {.causal = true});  // [B,T,H,dh]
  return query_preimage(w1->weight.view({H, dh, D}), read).mean(2);                             // [B,T,D]
}

torch::Tensor EnergyMixerImpl::update(const torch::Tensor& x, const torch::Tensor& h) {
  const bool outer = torch::GradMode::is_enabled();  // training: differentiate through the steps
  torch::AutoGradMode on(true);
  // The iterate in float32 at least: the output z - z0 is small against z, and would cancel in bfloat16.
  auto z0 = x.to(torch::promote_types(x.scalar_type(), torch::kFloat)).clone();
  if (!z0.requires_grad()) z0.requires_grad_();
  auto z = z0;
  torch::Tensor momentum = torch::zeros_like(z0);
  const std::string& opt = options_.optimizer;
  const double eta = options_.eta, beta = options_.beta;
  for (int64_t s = 0; s < options_.steps; ++s) {
    if (opt == "newton_taylor") {
      z = z - eta * taylor_direction(z, h);
    } else if (opt == "newton") {
      z = z - eta * newton_direction(z, h, outer);
    } else if (opt == "gd") {
      z = z - eta * gradient(z, h, outer);
    } else {
      auto at = opt == "nesterov" ? z - beta * momentum : z;  // the look-ahead point
      momentum = beta * momentum + gradient(at, h, outer);
      z = z - eta * momentum;
    }
  }
  auto out = (z - z0).to(x.scalar_type());
  return outer ? out : out.detach();
}

torch::Tensor EnergyMixerImpl::forward(const torch::Tensor& x) {
  check_input(x);
  // The energy's causal [T,S] products multiply an invisible key's NaN by a zero weight (and the update is their
  // gradient), so outputs before a non-finite token are recomputed from the finite prefix, as the ops do.
  return ops::causal_outputs(true, {x}, x, {}, [&](const ops::Window& w) {
    const auto xw = w.keys(x);
    return std::vector<torch::Tensor>{update(xw, xw)};
  })[0];
}

namespace {
struct ContextTokens {
  torch::Tensor h;  // [B,S,D]: the context tokens so far
};
}  // namespace

DecodeState EnergyMixerImpl::init_state(int64_t batch) const {
  return DecodeState::of(ContextTokens{torch::zeros({batch, 0, options_.dim}, w1->weight.options())});
}

torch::Tensor EnergyMixerImpl::prefill(const torch::Tensor& x, DecodeState& state) {
  check_input(x);
  auto& context = state.as<ContextTokens>(kind());
  context.h = torch::cat({context.h, x}, 1);
  state.position += x.size(1);
  return update(x, context.h);
}

torch::Tensor EnergyMixerImpl::step(const torch::Tensor& x_t, DecodeState& state) {
  check_step_input(x_t);
  return prefill(x_t.unsqueeze(1), state).squeeze(1);
}

namespace {

// An option the chosen recipe would ignore, set to another value than its default, is an error.
void check_energy(const EnergyMixerOptions& e) {
  const EnergyMixerOptions defaults;
  if (e.beta != defaults.beta && e.optimizer != "momentum" && e.optimizer != "nesterov")
    throw Error("mixer energy: beta applies to optimizer=momentum or nesterov only");
  if (e.p != defaults.p && e.local != "lp") throw Error("mixer energy: p applies to local=lp only");
  if (e.delta != defaults.delta && e.local != "huber") throw Error("mixer energy: delta applies to local=huber only");
}
}  // namespace

const MixerDeclaration& energy_mixer_declaration() {
  using O = EnergyMixerOptions;
  using Names = std::vector<std::string>;
  static const MixerDeclaration declaration =
      MixerDeclarationOf<O>{
          .name = "energy",
          .meaning = "the energy framework: optimiser steps on F(E(z, h_i)) by autograd, any recipe (research)",
          .fields = {Field<O>::choice("local", &O::local, Names{"abs_inner", "neg_inner", "half_sq_distance", "lp", "huber"},
                                      "local energy E_i(q, k_i), q = W1 z, k_i = W2 h_i"),
                     Field<O>::choice("global", &O::global, Names{"neg_sum_squares", "gated_sum_squares", "helmholtz"},
                                      "global energy: -T/2 sum E^2, its forgetting-gated form, -T log sum exp(-E/T)"),
                     Field<O>::choice("optimizer", &O::optimizer, Names{"gd", "momentum", "nesterov", "newton", "newton_taylor"},
                                      "optimiser (newton: no backward, analysis only; newton_taylor: helmholtz + "
                                      "half_sq_distance)"),
                     Field<O>::integer("heads", &O::heads, "heads (F is their average)", 1),
                     Field<O>::integer("steps", &O::steps, "optimiser steps per layer", 1, 64),
                     Field<O>::real("eta", &O::eta, "step size"),
                     Field<O>::real("beta", &O::beta, "momentum coefficient (momentum, nesterov)"),
                     Field<O>::real("temperature", &O::temperature, "T (0 = sqrt(head width))", 0.0),
                     Field<O>::real("p", &O::p, "exponent of the lp local energy", 1.0),
                     Field<O>::real("delta", &O::delta, "threshold of the huber local energy", 1e-12)},
          .make = make_layer<EnergyMixerImpl, EnergyMixerOptions>,
          .check = check_energy}
          .erase();
  return declaration;
}

}  // namespace seqmix
