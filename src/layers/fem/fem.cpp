#include "seqmix/layers/fem.h"

#include "seqmix/layers/mixer_spec.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "../priors/prior.h"
#include "seqmix/io/error.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"
#include "seqmix/ops/fem.h"

namespace seqmix {
namespace {

// Nearest multiple of unit (exact ties go to the smaller), at least one unit.
int64_t round_to_multiple(double x, int64_t unit) {
  const double q = x / static_cast<double>(unit);
  const double lo = std::floor(q), hi = std::ceil(q);
  const double pick = (q - lo <= hi - q) ? lo : hi;
  return std::max<int64_t>(1, static_cast<int64_t>(pick)) * unit;
}

// Start of the conditioner's running max before any token: exp(start - u) is exactly 0 for any real u.
constexpr double kRunningMaxStart = -1e30;

// FEM's decode state: the conditioner's scan, the prior's own state, and the read's bookkeeping.
struct FemState {
  ops::LinearAttentionState conditioner;  // with flag C
  std::any prior;
  torch::Tensor count;  // [B] real tokens seen per row (RoPE positions)
  torch::Tensor max;    // [B,H,dv] running max of beta v per channel (cap = 0)
};

}  // namespace

std::vector<std::string> fem_prior_names() { return prior_names(); }

void parse_fem_flags(const std::string& flags, FemOptions& o) {
  o.conditioner = o.lse = o.temperature = o.gate = false;
  for (char c : flags) {
    switch (c) {
      case 'C': o.conditioner = true; break;
      case 'L': o.lse = true; break;
      case 'T': o.temperature = true; break;
      case 'G': o.gate = true; break;
      default:
        throw Error(std::string("mixer fem: unknown flag '") + c + "' in flags=" + flags +
                    "; flags are C (conditioner), L (log-sum-exp read), T (temperature learning), G (outer gate)");
    }
  }
}

std::string fem_flags(const FemOptions& o) {
  return std::string(o.conditioner ? "C" : "") + (o.lse ? "L" : "") + (o.temperature ? "T" : "") + (o.gate ? "G" : "");
}

FemWidths fem_widths(const FemOptions& o) {
  if (o.budget != "i" && o.budget != "ii") throw Error("mixer fem: budget must be i or ii (got '" + o.budget + "')");
  const double D = static_cast<double>(o.dim);
  const bool first = o.budget == "i";
  FemWidths w;
  w.value = o.value_dim > 0 ? o.value_dim : round_to_multiple(first ? D / 2 : 2 * D / 3, 2 * o.heads);
  const double r = first ? 4.0 : 2.0;  // prior ratio: the prior block is D x (r d), split over W_q and W_k
  w.qk = o.qk_dim > 0 ? o.qk_dim : round_to_multiple(0.5 * r * static_cast<double>(w.value), 2 * o.heads);
  return w;
}

struct FemImpl::Projected {
  torch::Tensor v;       // [B,T,H,dv]
  torch::Tensor lambda;  // [B,T,H,dv] or undefined
  torch::Tensor gate;    // [B,T,H,dv] or undefined
  PriorInputs prior;
};

void check_fem_options(const FemOptions& o) {
  if (o.heads < 1) throw Error("mixer fem: heads must be >= 1");
  if (o.temperature && !o.lse) throw Error("mixer fem: flag T (temperature learning) needs L (the log-sum-exp read)");
  if (o.cap < 0 || o.cap > ops::kMaxConstantShiftCap)
    throw Error("mixer fem: cap must be 0 (off) or in (0, 43] so exp(-2 cap) stays representable in fp32");
  // Only an explicit fused asks for a kernel that cap=0's streaming read cannot use (auto is fused otherwise).
  if (o.impl == ops::Impl::fused && o.lse && o.cap == 0 && o.causal)
    throw Error("mixer fem: impl=fused needs a value cap > 0 (cap=0 always runs the step-by-step streaming read)");
  if (o.impl.value_or(ops::Impl::fused) == ops::Impl::fused && o.lse && o.prior == "softmax" &&
      o.cap > ops::kFemFusedMaxCap)
    throw Error("mixer fem: the fused softmax read supports cap <= 40 (float32 range); set cap <= 40 or impl=naive");
}

FemImpl::FemImpl(const FemOptions& o) : MixerImpl("fem", o.dim, o.causal), options_(o) {
  check_fem_options(o);
  widths_ = fem_widths(o);
  if (o.raw_values) {
    if (o.value_dim > 0 && o.value_dim != o.dim)
      throw Error("mixer fem: raw values have the model width " + std::to_string(o.dim) + ", not value_dim=" +
                  std::to_string(o.value_dim));
    widths_.value = o.dim;
  }
  if (widths_.value % o.heads != 0) throw Error("mixer fem: value width " + std::to_string(widths_.value) +
                                                " (value_dim, or the width)" +
                                                " is not divisible by heads=" + std::to_string(o.heads));
  head_dim_ = widths_.value / o.heads;
  const PriorDeclaration& declared = prior_declaration(o.prior);
  const bool has_qk = declared.has_query_key;
  if (has_qk && widths_.qk % o.heads != 0)
    throw Error("mixer fem: query/key width " + std::to_string(widths_.qk) + " (qk_dim) is not divisible by heads=" +
                std::to_string(o.heads));
  const bool rope = o.rope < 0 ? has_qk : o.rope == 1;
  if (rope && !has_qk) throw Error("mixer fem: prior " + o.prior + " has no queries or keys for rope=1");
  if (rope && (widths_.qk / o.heads) % 2 != 0) throw Error("mixer fem: rope=1 needs an even query/key head width");

  PriorConfig pc;
  pc.dim = o.dim;
  pc.heads = o.heads;
  pc.value_head_dim = head_dim_;
  pc.qk_head_dim = has_qk ? widths_.qk / o.heads : 0;
  pc.rope = rope;
  pc.rope_theta = o.rope_theta;
  pc.eps = o.eps;
  if (const auto own = o.prior_options.find(o.prior); own != o.prior_options.end()) pc.own = own->second;
  pc.bias = o.bias;
  pc.causal = o.causal;
  if (o.impl && !declared.impls.contains(*o.impl))
    throw Error("mixer fem: prior " + o.prior + " has no impl=" + ops::impl_name(*o.impl) + "; its impls: " +
                declared.impls.names());
  pc.impl = o.impl.value_or(ops::Impl::automatic);
  prior = register_module("prior", build_prior(o.prior, pc, *this));
  if (!o.causal && !prior->supports_bidirectional())
    throw Error("mixer fem: prior " + o.prior + " is causal only (causal=0 needs softmax or linear)");

  const int64_t d = widths_.value;
  auto linear = [&](const char* name, int64_t in, int64_t out) {
    auto l = register_module(name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(o.bias)));
    init_linear(l);
    return l;
  };
  if (!o.raw_values) {
    value = linear("value", o.dim, d);
    output = linear("output", d, o.dim);
  }
  if (o.temperature) {
    lambda_proj = linear("lambda_proj", o.dim, d);
    beta_param = register_parameter("beta_param", torch::zeros({d}));
  }
  if (o.gate) gate_proj = linear("gate_proj", o.dim, d);
  if (o.conditioner) {
    const int64_t hidden = o.tdc_hidden > 0 ? o.tdc_hidden : std::max<int64_t>(1, d / 16);
    const int64_t width = d + prior->modulation_width() + (o.temperature ? d : 0) + (o.gate ? d : 0);
    conditioner = register_module("conditioner", TimeDecayConditioner(o.dim, hidden, width, o.impl.value_or(ops::Impl::automatic)));
  }
}

torch::Tensor FemImpl::beta() const {
  if (options_.temperature) return torch::softplus(beta_param + options_.beta_offset);
  return torch::ones({widths_.value}, prior->parameters().front().options());
}

FemImpl::Projected FemImpl::project(const torch::Tensor& x, const torch::Tensor& mask, const torch::Tensor& positions,
                                    const torch::Tensor& modulation) {
  const int64_t d = widths_.value, H = options_.heads;
  int64_t at = 0;
  auto take = [&](int64_t width) {
    auto s = modulation.defined() ? modulation.narrow(-1, at, width) : torch::Tensor();
    at += width;
    return s;
  };
  const auto mod_v = take(d), mod_prior = take(prior->modulation_width());
  const auto mod_lambda = options_.temperature ? take(d) : torch::Tensor();
  const auto mod_gate = options_.gate ? take(d) : torch::Tensor();
  auto modulated = [](torch::Tensor pre, const torch::Tensor& m) { return m.defined() ? pre * (1 + m) : pre; };

  Projected p;
  auto v = modulated(value ? value(x) : x, mod_v);
  if (mask.defined()) v = v * mask.unsqueeze(-1).to(v.scalar_type());
  p.v = split_heads(v, H);
  p.prior = prior->prepare(x, mod_prior, mask, Positions(positions));
  if (options_.temperature) p.lambda = split_heads(torch::sigmoid(modulated(lambda_proj(x), mod_lambda)), H);
  if (options_.gate) {
    auto a = split_heads(torch::softplus(modulated(gate_proj(x), mod_gate)), H);
    p.gate = a * torch::rsqrt(a.square().mean(-1, /*keepdim=*/true) + options_.eps);  // RMS 1 per head
  }
  return p;
}

torch::Tensor FemImpl::combine(const torch::Tensor& mu, const torch::Tensor& free_energy, const Projected& p) {
  torch::Tensor y = mu;
  if (options_.lse) y = options_.temperature ? (1 - p.lambda) * mu + p.lambda * free_energy : free_energy;
  if (options_.gate) y = y * p.gate;
  return output ? output(merge_heads(y)) : merge_heads(y);
}

torch::Tensor FemImpl::run(const torch::Tensor& input, const torch::Tensor& mask) {
  check_input(input);
  if (mask.defined())
    TORCH_CHECK(mask.scalar_type() == torch::kBool && mask.dim() == 2 && mask.size(0) == input.size(0) &&
                    mask.size(1) == input.size(1),
                "mixer fem: padding mask must be bool [B,T] = [", input.size(0), ",", input.size(1), "] (got ",
                mask.scalar_type(), " ", mask.sizes(), ")");
  // What a padded position holds never matters (the mask keeps it out of every support): zeroed here, so that a
  // NaN or inf there cannot reach a real output through a product with a zero weight (with padding before the
  // real tokens it did; seqmix verify's padding certificate found it).
  const torch::Tensor x = mask.defined() ? input.masked_fill(mask.logical_not().unsqueeze(-1), 0) : input;
  if (options_.lse && options_.cap == 0 && is_causal()) {
    // Without the cap the shift is each query's causal running max: the streaming form computes it exactly.
    auto state = init_state(x.size(0));
    std::vector<torch::Tensor> ys;
    for (int64_t t = 0; t < x.size(1); ++t)
      ys.push_back(step_masked(x.select(1, t), mask.defined() ? mask.select(1, t) : torch::Tensor(), state));
    return torch::stack(ys, 1);
  }
  const auto modulation = options_.conditioner ? conditioner->forward(x, mask) : torch::Tensor();
  // Positions count real tokens only, so padding shifts no position.
  const auto positions = mask.defined() ? (mask.to(torch::kLong).cumsum(1) - 1).clamp_min(0)
                                        : torch::arange(x.size(1), x.options().dtype(torch::kLong)).expand({x.size(0), x.size(1)});
  Projected p = project(x, mask, positions, modulation);
  if (!options_.lse) return combine(prior->read_in_float32(p.v, p.prior), {}, p);

  const auto b = beta();
  if (auto fused = prior->fused_free_energy_read(p.v, b, options_.cap, p.prior))
    return combine(fused->mean, fused->free_energy, p);
  // cap > 0: the constant shift cap. cap = 0 (bidirectional): one shift per channel over the whole real support.
  ops::ShiftOf shift_of;
  torch::Tensor support;
  if (options_.cap == 0) {
    if (mask.defined()) support = mask.view({mask.size(0), mask.size(1), 1, 1});
    shift_of = [&support](const torch::Tensor& u) {
      const auto minus_inf = torch::full_like(u, -std::numeric_limits<double>::infinity());
      const auto shift = (support.defined() ? torch::where(support, u, minus_inf) : u).amax(1, /*keepdim=*/true).detach();
      return torch::where(torch::isfinite(shift), shift, torch::zeros_like(shift));
    };
  }
  // The read runs in fp64: with a constant shift e can be as small as exp(-2 cap), and its products with
  // small prior weights, and their reciprocals in the backward pass, leave fp32's range. (The fused
  // softmax read of the fused impl tracks running maxima instead and stays in fp32.)
  const PriorInputs wide = p.prior.to(torch::kDouble);
  const auto r = ops::fem_free_energy_read(p.v, b.view({options_.heads, head_dim_}), options_.cap, shift_of, support,
                                           torch::kDouble, [&](const torch::Tensor& w) { return prior->read(w, wide); });
  return combine(r.mean, r.free_energy, p);
}

torch::Tensor FemImpl::forward(const torch::Tensor& x) { return run(x, {}); }

torch::Tensor FemImpl::forward_masked(const torch::Tensor& x, const torch::Tensor& padding_mask) {
  return run(x, padding_mask);
}

DecodeState FemImpl::init_state(int64_t batch) const {
  check_decodable();
  FemState s;
  if (options_.conditioner) s.conditioner = conditioner->init_state(batch);
  s.prior = prior->init_state(batch, options_.lse ? 2 * head_dim_ : head_dim_);
  s.count = torch::zeros({batch}, value->weight.options().dtype(torch::kLong));  // on the layer's device
  if (options_.lse && options_.cap == 0)
    s.max = torch::full({batch, options_.heads, head_dim_}, kRunningMaxStart,
                        recurrent_state_options(prior->parameters().front().options()));
  return DecodeState::of(std::move(s));
}

torch::Tensor FemImpl::step(const torch::Tensor& x_t, DecodeState& state) {
  check_step_input(x_t);
  return step_masked(x_t, {}, state);
}

torch::Tensor FemImpl::step_masked(const torch::Tensor& x_t, const torch::Tensor& mask_t, DecodeState& state) {
  const auto x = x_t.unsqueeze(1);
  const auto mask = mask_t.defined() ? mask_t.unsqueeze(1) : torch::Tensor();
  auto& fem = state.as<FemState>("fem");
  const auto modulation =
      options_.conditioner ? conditioner->step(x_t, fem.conditioner, mask_t).unsqueeze(1) : torch::Tensor();
  auto& count = fem.count;
  Projected p = project(x, mask, count.unsqueeze(1), modulation);
  count = count + (mask_t.defined() ? mask_t.to(torch::kLong) : torch::ones_like(count));
  const auto v = p.v.squeeze(1);  // [B,H,dv]
  torch::Tensor y;
  if (!options_.lse) {
    y = combine(prior->step_in_float32(v, p.prior, fem.prior).unsqueeze(1), {}, p);
  } else {
    const auto b = beta();
    ops::ShiftOf shift_of;
    torch::Tensor support;
    if (options_.cap == 0) {
      // Running max per channel; the state's exp-branch is rescaled to it, so the shift stays exact.
      if (mask_t.defined()) support = mask_t.view({-1, 1, 1});
      shift_of = [&](const torch::Tensor& u) {
        const auto old_max = fem.max;
        auto new_max = torch::maximum(old_max, u.detach());
        if (mask_t.defined()) new_max = torch::where(support, new_max, old_max);
        prior->rescale(fem.prior, head_dim_, 2 * head_dim_, (old_max - new_max).exp());
        fem.max = new_max;
        return new_max;
      };
    }
    // In float32 at least, the prior's inputs too: exp(u - shift) reaches exp(-2 cap), below float16's range, and
    // F = (log z + shift) / beta needs z to far better than bfloat16's 8 bits (log z is -shift + beta v).
    const auto read_type = torch::promote_types(v.scalar_type(), torch::kFloat);
    const PriorInputs in_t = p.prior.to(read_type);
    const auto r =
        ops::fem_free_energy_read(v, b.view({options_.heads, head_dim_}), options_.cap, shift_of, support, read_type,
                                  [&](const torch::Tensor& w) { return prior->step(w, in_t, fem.prior); });
    y = combine(r.mean.unsqueeze(1), r.free_energy.unsqueeze(1), p);
  }
  state.position += 1;
  return y.squeeze(1);
}

namespace {

// The options every prior declares in its own file, each key once (in the priors' listing order), as FEM's: a value
// reads into the options struct of each prior that declares its key (FemOptions::prior_options).
std::vector<Field<FemOptions>> prior_option_fields() {
  std::vector<Field<FemOptions>> fields;
  std::vector<std::string> keys;
  for (const auto& prior : prior_declarations())
    for (const auto& info : prior.component.info.options) {
      if (std::find(keys.begin(), keys.end(), info.key) != keys.end()) continue;
      keys.push_back(info.key);
      std::vector<const PriorDeclaration*> declaring;
      for (const auto& other : prior_declarations())
        for (const auto& same : other.component.info.options)
          if (same.key == info.key) {
            if (same.default_value != info.default_value || same.type != info.type)
              throw std::logic_error("prior option " + info.key + ": priors " + prior.name() + " and " + other.name() +
                                     " declare it differently");
            declaring.push_back(&other);
          }
      fields.push_back(Field<FemOptions>::custom(info, [declaring](const Options& o, FemOptions& out) {
        for (const PriorDeclaration* p : declaring) out.prior_options[p->name()] = p->component.parse(o);
      }));
    }
  return fields;
}

// FEM's fields with the priors' options inserted after `after` (tdc_hidden, where FEM's list had ssm_state and
// gate_normalizer before they moved to their priors; resolved specs now list them in the priors' order).
std::vector<Field<FemOptions>> with_prior_options(std::vector<Field<FemOptions>> fields, const std::string& after) {
  auto at = std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.info.key == after; });
  if (at == fields.end()) throw std::logic_error("mixer fem: no option " + after);
  const auto prior_fields = prior_option_fields();
  fields.insert(at + 1, prior_fields.begin(), prior_fields.end());
  return fields;
}

}  // namespace

const MixerDeclaration& fem_mixer_declaration() {
  using O = FemOptions;
  using MaybeImpl = std::optional<ops::Impl>;
  static const MixerDeclaration declaration =
      MixerDeclarationOf<O>{
          .name = "fem",
          .meaning = "Free Energy Mixer: a per-channel free-energy (log-sum-exp) read on a selection prior",
          .fields = with_prior_options(
              {Field<O>::choice("prior", &O::prior, fem_prior_names(), "selection prior p_t"),
               Field<O>::custom(OptionInfo::text("flags", fem_flags(O{}),
                                                 "modules: C conditioner, L log-sum-exp read, T temperature learning, "
                                                 "G outer gate"),
                                [](const Options& o, O& out) { parse_fem_flags(o.text("flags"), out); }),
               Field<O>::integer("heads", &O::heads, "number of heads", 1),
               Field<O>::choice("budget", &O::budget, std::vector<std::string>{"i", "ii"},
                                "parameter budget: i d=D/2 r=4, ii d=2D/3 r=2 (4D^2 both)"),
               Field<O>::integer("value_dim", &O::value_dim, "value width d over all heads (0 = from the budget)", 0),
               Field<O>::integer("qk_dim", &O::qk_dim, "query/key width over all heads (0 = from the budget)", 0),
               Field<O>::choice("rope", &O::rope, {{"auto", -1}, {"0", 0}, {"1", 1}},
                                "RoPE on q and k (auto: on for the priors with queries and keys)"),
               Field<O>::real("rope_theta", &O::rope_theta, "RoPE base", 1.0),
               Field<O>::real("beta_offset", &O::beta_offset, "beta = softplus(param + offset), param initialised to 0"),
               Field<O>::real("cap", &O::cap, "value cap |beta v| <= cap (0 = off: exact running maxima instead)", 0.0,
                              43.0),
               Field<O>::integer("tdc_hidden", &O::tdc_hidden, "conditioner width H_c (0 = d/16)", 0),
               Field<O>::real("eps", &O::eps, "feature offset (ReLU+eps) and gate RMS floor", 0.0),
               Field<O>::flag("bias", &O::bias, "biases in the projections"),
               Field<O>::flag("causal", &O::causal, "causal, or bidirectional (softmax and linear priors)"),
               Field<O>::choice("impl", &O::impl,
                                {{"auto", MaybeImpl()}, {"fused", MaybeImpl(ops::Impl::fused)},
                                 {"naive", MaybeImpl(ops::Impl::naive)}},
                                "fused kernels (the softmax prior's one-pass mu+F read, cap <= 40) or the naive reads; "
                                "auto: fused, except that cap=0 (causal) streams step by step")},
              "tdc_hidden"),
          .make = make_layer<FemImpl, FemOptions>,
          .check = check_fem_options}
          .erase();
  return declaration;
}

}  // namespace seqmix
