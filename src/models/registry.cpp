// The built-in components and their options. Each entry reads its Options into the layer's own
// options struct, so layers stay free of spec strings.
#include "seqmix/models/registry.h"

#include <functional>

#include <torch/torch.h>

#include "seqmix/io/error.h"
#include "seqmix/layers/energy_mixer.h"
#include "seqmix/layers/exact_linear_attention.h"
#include "seqmix/layers/fem.h"
#include "seqmix/layers/gated_linear_attention.h"
#include "seqmix/layers/hypermlp.h"
#include "seqmix/layers/linear_attention.h"
#include "seqmix/layers/relu_attention.h"
#include "seqmix/layers/second_order_attention.h"
#include "seqmix/layers/selective_ssm.h"
#include "seqmix/layers/softmax_attention.h"
#include "seqmix/modules/mixture_of_experts.h"
#include "seqmix/ops/ela.h"
#include "seqmix/ops/fem.h"

namespace seqmix {
namespace {

using MixerBuilder = std::function<Mixer(const MixerContext&, const Options&)>;
struct MixerEntry {
  ComponentInfo info;
  MixerBuilder build;
};

std::vector<OptionInfo> kv_attention_options(bool rope_default) {
  return {OptionInfo::integer("heads", 4, "number of heads (must divide the width)", 1),
          OptionInfo::flag("rope", rope_default, "rotary position embedding on q and k"),
          OptionInfo::real("rope_theta", 10000.0, "RoPE base", 1.0),
          OptionInfo::flag("bias", true, "biases in the q/k/v and output projections"),
          OptionInfo::flag("causal", true, "causal (decoder) or bidirectional (encoder)")};
}

void read_kv_attention(const MixerContext& c, const Options& o, KVAttentionOptions& a) {
  a.dim = c.dim;
  a.raw_values = c.raw_values;
  a.heads = o.integer("heads");
  a.rope = o.flag("rope");
  a.rope_theta = o.real("rope_theta");
  a.bias = o.flag("bias");
  a.causal = o.flag("causal");
}

OptionInfo impl_option() {
  return OptionInfo::choice("impl", "fused", {"fused", "naive"}, "fused kernel or its naive (materialised) twin");
}

std::vector<OptionInfo> with(std::vector<OptionInfo> base, const std::vector<OptionInfo>& extra) {
  base.insert(base.end(), extra.begin(), extra.end());
  return base;
}

// The ELA kernels with their feature maps, for `seqmix list`.
std::vector<std::string> ela_notes() {
  std::vector<std::string> notes{"kernels:"};
  for (const auto& name : ops::exact_kernel_names()) notes.push_back("  " + name + ": " + ops::exact_kernel(name).description);
  return notes;
}

// hypermlp (bases S, R) and hyperglu (base G): one layer, any Table 1 label.
constexpr int64_t kHyperMixRank = 16, kHyperBlock = 256;
constexpr double kHyperRopeTheta = 10000.0;
ComponentInfo hyper_info(const std::string& name, const std::string& meaning, const std::string& variant, bool glu) {
  std::vector<std::string> notes = {"Table 1 labels (variant=...):"};
  std::string line;
  for (const auto& [label, title] : hyper_table1_labels()) {
    if ((label[0] == 'G') != glu) continue;
    const std::string item = title.empty() ? label : label + " (" + title + ")";
    if (line.size() + item.size() > 90) notes.push_back("  " + line), line.clear();
    line += (line.empty() ? "" : ", ") + item;
  }
  notes.push_back("  " + line);
  notes.push_back("Grammar: Base[-Feat][-Rank][-Mix][!]; Feat from p (RoPE), c (KV conv), g (gates); Rank q|v "
                  "(matched budget); Mix 1|2|12 (+o lag layout); ! no compression.");
  return {name, meaning,
          {OptionInfo::text("variant", variant, "variant label, e.g. " + variant + " (listed below)"),
           OptionInfo::integer("heads", 2, "value heads (the paper fixes 2; G has 2 score heads per value head)", 1),
           OptionInfo::integer("mix_rank", kHyperMixRank, "rank r_s of the DPLR sequence mixers (labels with 1, 2, 12)", 1),
           OptionInfo::integer("max_len", 0, "positions the mixing parameters cover (0 = the model's length)", 0),
           OptionInfo::integer("qk_rank", 0, "total QK rank by hand (0 = from the label; '!' labels only)", 0),
           OptionInfo::integer("vo_rank", 0, "total VO rank by hand (0 = from the label; '!' labels only)", 0),
           OptionInfo::integer("block", kHyperBlock, "query rows per block of the blocked read (0 = one block)", 0),
           OptionInfo::real("rope_theta", kHyperRopeTheta, "RoPE base (labels with p)", 1.0),
           OptionInfo::real("eps", 1e-12, "under the square root of the score-row norm (R, G)", 0.0),
           OptionInfo::flag("bias", false, "biases on W_q, W_k, W_v, W_o (gates and controls always have them)"),
           OptionInfo::choice("path", "blocked", {"blocked", "dense"},
                              "blocked read (row blocks, no t x t mixer) or its dense naive twin (O(T^3))")},
          notes};
}

Mixer build_hyper(const std::string& name, bool glu, const MixerContext& c, const Options& o) {
  HyperMlpOptions h;
  try {
    h.variant = HyperVariant::parse(o.text("variant"));
  } catch (const Error& e) {
    throw Error("mixer " + name + ": " + e.what());
  }
  const HyperVariant& v = h.variant;
  if ((v.base == 'G') != glu)
    throw Error("mixer " + name + ": variant " + v.label + " has base " + v.base + "; " +
                (glu ? "hyperglu takes G labels (use hypermlp for S and R)" : "hypermlp takes S and R labels (use hyperglu for G)"));
  // A value other than the default that the label would ignore is an error. (Not `was_given`: a resolved
  // spec, as a run's config.yaml holds it, spells every option out.)
  if (o.real("rope_theta") != kHyperRopeTheta && !v.rope)
    throw Error("mixer " + name + ": rope_theta applies only to labels with p (RoPE); variant " + v.label + " has none");
  for (const char* key : {"mix_rank", "max_len"})
    if (o.integer(key) != (key == std::string("mix_rank") ? kHyperMixRank : 0) && !v.mixes())
      throw Error("mixer " + name + ": " + key + " applies only to labels with temporal mixing (1, 2, 12); variant " +
                  v.label + " has none");
  if (o.integer("block") != kHyperBlock && o.text("path") == "dense") throw Error("mixer " + name + ": block applies to path=blocked only");
  h.dim = c.dim;
  h.heads = o.integer("heads");
  h.mix_rank = o.integer("mix_rank");
  h.max_len = o.integer("max_len") > 0 ? o.integer("max_len") : c.max_len;
  h.qk_rank = o.integer("qk_rank");
  h.vo_rank = o.integer("vo_rank");
  h.block = o.integer("block");
  h.rope_theta = o.real("rope_theta");
  h.eps = o.real("eps");
  h.bias = o.flag("bias");
  h.dense = o.text("path") == "dense";
  return std::make_shared<HyperMlpImpl>(name, h);
}

const std::vector<MixerEntry>& mixer_entries() {
  static const std::vector<MixerEntry> entries = {
      {{"softmax", "multi-head softmax attention (the S baseline)",
        with(kv_attention_options(true),
             {OptionInfo::real("scale", 0.0, "score scale; 0 means 1/sqrt(head width)", 0.0),
              OptionInfo::choice("impl", "fused", {"fused", "naive", "torch"},
                                 "fused kernel, its naive (materialised) twin, or torch's scaled_dot_product_attention")})},
       [](const MixerContext& c, const Options& o) -> Mixer {
         SoftmaxAttentionOptions a;
         read_kv_attention(c, o, a);
         a.scale = o.real("scale");
         a.impl = ops::parse_impl(o.text("impl"));
         return std::make_shared<SoftmaxAttentionImpl>(a);
       }},
      {{"relu", "ReLU attention: ReLU(L2Norm(q K^T)) V per head (HyperMLP's R)",
        with(kv_attention_options(true),
             {OptionInfo::real("eps", 1e-12, "added under the square root of the score-row norm", 0.0)})},
       [](const MixerContext& c, const Options& o) -> Mixer {
         ReluAttentionOptions a;
         read_kv_attention(c, o, a);
         a.eps = o.real("eps");
         return std::make_shared<ReluAttentionImpl>(a);
       }},
      {{"linear", "normalised linear attention with a positive feature map",
        {OptionInfo::integer("heads", 4, "number of heads (must divide the width)", 1),
         OptionInfo::choice("feature", "relu", {"relu", "elu"}, "feature map: ReLU(x)+eps or ELU(x)+1"),
         OptionInfo::real("eps", 1e-6, "feature offset and normaliser floor", 0.0),
         OptionInfo::flag("rope", false, "rotary position embedding on q and k before the feature map"),
         OptionInfo::real("rope_theta", 10000.0, "RoPE base", 1.0),
         OptionInfo::flag("bias", true, "biases in the projections"),
         OptionInfo::flag("causal", true, "causal (decoder) or bidirectional (encoder)"),
         impl_option()}},
       [](const MixerContext& c, const Options& o) -> Mixer {
         LinearAttentionOptions a;
         a.impl = ops::parse_impl(o.text("impl"));
         a.dim = c.dim;
         a.heads = o.integer("heads");
         a.feature = parse_feature_map(o.text("feature"));
         a.eps = o.real("eps");
         a.rope = o.flag("rope");
         a.rope_theta = o.real("rope_theta");
         a.bias = o.flag("bias");
         a.causal = o.flag("causal");
         return std::make_shared<LinearAttentionImpl>(a);
       }},
      {{"ela", "Exact Linear Attention: row-normalised attention under an exactly decomposable kernel, O(T)",
        {OptionInfo::integer("heads", 4, "number of heads (must divide the width)", 1),
         OptionInfo::text("kernel", "hadamard_exp",
                          "hadamard_exp, sum_sq_euclidean, sub_sq_euclidean, direction_magnitude, or a registered one"),
         OptionInfo::flag("rope", true, "rotary position embedding on q and k"),
         OptionInfo::real("rope_theta", 10000.0, "RoPE base", 1.0),
         OptionInfo::real("scale", 1.0, "q and k are multiplied by it before the kernel", 1e-12),
         OptionInfo::flag("bias", false, "biases in the projections"),
         OptionInfo::flag("out", true, "output projection"),
         OptionInfo::real("eps", 1e-8, "row-sum floor", 0.0),
         OptionInfo::flag("causal", true, "causal (prefix sums) or bidirectional (one accumulation)"),
         impl_option()},
        ela_notes()},
       [](const MixerContext& c, const Options& o) -> Mixer {
         ExactLinearAttentionOptions a;
         a.impl = ops::parse_impl(o.text("impl"));
         a.dim = c.dim;
         a.heads = o.integer("heads");
         a.kernel = o.text("kernel");
         a.rope = o.flag("rope");
         a.rope_theta = o.real("rope_theta");
         a.scale = o.real("scale");
         a.bias = o.flag("bias");
         a.output = o.flag("out");
         a.eps = o.real("eps");
         a.causal = o.flag("causal");
         return std::make_shared<ExactLinearAttentionImpl>(a);
       }},
      {{"gla", "gated linear attention with a data-dependent decay per head (causal)",
        {OptionInfo::integer("heads", 4, "number of heads (must divide the width)", 1),
         OptionInfo::choice("feature", "relu", {"relu", "elu", "identity"},
                            "feature map on q and k (identity only with normalize=0)"),
         OptionInfo::flag("normalize", true, "divide by the decayed normaliser (a decayed average)"),
         OptionInfo::real("gate_normalizer", 16.0, "divides the log decay logsigmoid(w.x+b)", 1e-6),
         OptionInfo::real("eps", 1e-6, "feature offset and normaliser floor", 0.0),
         OptionInfo::flag("rope", false, "rotary position embedding on q and k"),
         OptionInfo::real("rope_theta", 10000.0, "RoPE base", 1.0),
         OptionInfo::flag("bias", true, "biases in the q/k/v and output projections"),
         impl_option()}},
       [](const MixerContext& c, const Options& o) -> Mixer {
         GatedLinearAttentionOptions a;
         a.impl = ops::parse_impl(o.text("impl"));
         a.dim = c.dim;
         a.heads = o.integer("heads");
         a.feature = parse_feature_map(o.text("feature"));
         a.normalize = o.flag("normalize");
         a.gate_normalizer = o.real("gate_normalizer");
         a.eps = o.real("eps");
         a.rope = o.flag("rope");
         a.rope_theta = o.real("rope_theta");
         a.bias = o.flag("bias");
         return std::make_shared<GatedLinearAttentionImpl>(a);
       }},
      {{"ssm", "diagonal selective SSM, Mamba-style, with a positive impulse response (causal)",
        {OptionInfo::integer("expand", 2, "inner channels = expand * width", 1, 16),
         OptionInfo::integer("state", 16, "state size per channel", 1),
         OptionInfo::integer("conv", 4, "kernel of the short causal conv (0 = none)", 0, 64),
         OptionInfo::integer("dt_rank", 0, "rank of the step-size projection (0 = ceil(width/16))", 0),
         OptionInfo::real("dt_min", 1e-3, "smallest initial step size", 1e-8),
         OptionInfo::real("dt_max", 0.1, "largest initial step size", 1e-8),
         impl_option()}},
       [](const MixerContext& c, const Options& o) -> Mixer {
         SelectiveSSMOptions a;
         a.impl = ops::parse_impl(o.text("impl"));
         a.dim = c.dim;
         a.expand = o.integer("expand");
         a.state = o.integer("state");
         a.conv = o.integer("conv");
         a.dt_rank = o.integer("dt_rank");
         a.dt_min = o.real("dt_min");
         a.dt_max = o.real("dt_max");
         return std::make_shared<SelectiveSSMImpl>(a);
       }},
      {{"fem", "Free Energy Mixer: a per-channel free-energy (log-sum-exp) read on a selection prior",
        {OptionInfo::choice("prior", "softmax", fem_prior_names(), "selection prior p_t"),
         OptionInfo::text("flags", "CLTG",
                          "modules: C conditioner, L log-sum-exp read, T temperature learning, G outer gate"),
         OptionInfo::integer("heads", 4, "number of heads", 1),
         OptionInfo::choice("budget", "i", {"i", "ii"}, "parameter budget: i d=D/2 r=4, ii d=2D/3 r=2 (4D^2 both)"),
         OptionInfo::integer("value_dim", 0, "value width d over all heads (0 = from the budget)", 0),
         OptionInfo::integer("qk_dim", 0, "query/key width over all heads (0 = from the budget)", 0),
         OptionInfo::choice("rope", "auto", {"auto", "0", "1"}, "RoPE on q and k (auto: on for softmax, linear, gla)"),
         OptionInfo::real("rope_theta", 10000.0, "RoPE base", 1.0),
         OptionInfo::real("beta_offset", 1.8, "beta = softplus(param + offset), param initialised to 0"),
         OptionInfo::real("cap", 40.0, "value cap |beta v| <= cap (0 = off: exact running maxima instead)", 0.0, 43.0),
         OptionInfo::integer("tdc_hidden", 0, "conditioner width H_c (0 = d/16)", 0),
         OptionInfo::integer("ssm_state", 16, "state size of the ssm prior", 1),
         OptionInfo::real("gate_normalizer", 16.0, "gla/lrnn_decay log decay divisor", 1e-6),
         OptionInfo::real("eps", 1e-6, "feature offset (ReLU+eps) and gate RMS floor", 0.0),
         OptionInfo::flag("bias", true, "biases in the projections"),
         OptionInfo::flag("causal", true, "causal, or bidirectional (softmax and linear priors)"),
         OptionInfo::choice("impl", "auto", {"auto", "fused", "naive"},
                            "fused kernels (the softmax prior's one-pass mu+F read, cap <= 40) or the naive reads; "
                            "auto: fused, except that cap=0 (causal) streams step by step")}},
       [](const MixerContext& c, const Options& o) -> Mixer {
         FemOptions f;
         f.dim = c.dim;
         f.prior = o.text("prior");
         parse_fem_flags(o.text("flags"), f);
         f.heads = o.integer("heads");
         f.budget = o.text("budget");
         f.value_dim = o.integer("value_dim");
         f.qk_dim = o.integer("qk_dim");
         f.rope = o.text("rope") == "auto" ? -1 : std::stoi(o.text("rope"));
         f.rope_theta = o.real("rope_theta");
         f.beta_offset = o.real("beta_offset");
         f.cap = o.real("cap");
         f.tdc_hidden = o.integer("tdc_hidden");
         f.ssm_state = o.integer("ssm_state");
         f.gate_normalizer = o.real("gate_normalizer");
         f.eps = o.real("eps");
         f.bias = o.flag("bias");
         f.causal = o.flag("causal");
         f.raw_values = c.raw_values;
         // auto is fused; only an explicit fused asks for a kernel that cap=0's streaming read cannot use.
         f.impl = o.text("impl") == "naive" ? ops::Impl::naive : ops::Impl::fused;
         if (o.text("impl") == "fused" && f.lse && f.cap == 0 && f.causal)
           throw Error("mixer fem: impl=fused needs a value cap > 0 (cap=0 always runs the step-by-step streaming read)");
         if (f.impl == ops::Impl::fused && f.lse && f.prior == "softmax" && f.cap > ops::kFemFusedMaxCap)
           throw Error("mixer fem: the fused softmax read supports cap <= 40 (float32 range); set cap <= 40 or impl=naive");
         return std::make_shared<FemImpl>(f);
       }},
      {{"energy", "the energy framework: optimiser steps on F(E(z, h_i)) by autograd, any recipe (research)",
        {OptionInfo::choice("local", "neg_inner", {"abs_inner", "neg_inner", "half_sq_distance", "lp", "huber"},
                            "local energy E_i(q, k_i), q = W1 z, k_i = W2 h_i"),
         OptionInfo::choice("global", "helmholtz", {"neg_sum_squares", "gated_sum_squares", "helmholtz"},
                            "global energy: -T/2 sum E^2, its forgetting-gated form, -T log sum exp(-E/T)"),
         OptionInfo::choice("optimizer", "gd", {"gd", "momentum", "nesterov", "newton", "newton_taylor"},
                            "optimiser (newton: no backward, analysis only; newton_taylor: helmholtz + half_sq_distance)"),
         OptionInfo::integer("heads", 4, "heads (F is their average)", 1),
         OptionInfo::integer("steps", 1, "optimiser steps per layer", 1, 64),
         OptionInfo::real("eta", 1.0, "step size"),
         OptionInfo::real("beta", 0.9, "momentum coefficient (momentum, nesterov)"),
         OptionInfo::real("temperature", 0.0, "T (0 = sqrt(head width))", 0.0),
         OptionInfo::real("p", 1.5, "exponent of the lp local energy", 1.0),
         OptionInfo::real("delta", 1.0, "threshold of the huber local energy", 1e-12)}},
       [](const MixerContext& c, const Options& o) -> Mixer {
         EnergyMixerOptions e;
         e.dim = c.dim;
         e.local = o.text("local");
         e.global = o.text("global");
         e.optimizer = o.text("optimizer");
         e.heads = o.integer("heads");
         e.steps = o.integer("steps");
         e.eta = o.real("eta");
         e.beta = o.real("beta");
         e.temperature = o.real("temperature");
         e.p = o.real("p");
         e.delta = o.real("delta");
         if (e.beta != 0.9 && e.optimizer != "momentum" && e.optimizer != "nesterov")
           throw Error("mixer energy: beta applies to optimizer=momentum or nesterov only");
         if (e.p != 1.5 && e.local != "lp") throw Error("mixer energy: p applies to local=lp only");
         if (e.delta != 1.0 && e.local != "huber") throw Error("mixer energy: delta applies to local=huber only");
         return std::make_shared<EnergyMixerImpl>(e);
       }},
      {{"mha2nd1st",
        "MHA2nd1st: Newton step with a first-order Taylor inverse, Euclidean scores, key covariance bias",
        with(kv_attention_options(true),
             {OptionInfo::choice("bias_temperature", "multiplier", {"multiplier", "divisor"},
                                 "the learnable bias temperature (init 0.01) multiplies or divides b_h")})},
       [](const MixerContext& c, const Options& o) -> Mixer {
         SecondOrderAttentionOptions a;
         read_kv_attention(c, o, a);
         a.bias_temperature_divides = o.text("bias_temperature") == "divisor";
         return std::make_shared<Mha2nd1stImpl>(a);
       }},
      {{"light2nd1st", "LightMHA2nd1st: softmax attention plus tau_h Cov_p(v) vbar per head",
        with(kv_attention_options(true), {OptionInfo::real("tau", 0.01, "initial tau_h")})},
       [](const MixerContext& c, const Options& o) -> Mixer {
         SecondOrderAttentionOptions a;
         read_kv_attention(c, o, a);
         a.tau = o.real("tau");
         return std::make_shared<LightMha2nd1stImpl>(a);
       }},
      {hyper_info("hypermlp", "HyperMLP: attention as a dynamic 2-layer MLP with DPLR sequence mixing (S and R labels)",
                  "R-cg-q-12o", false),
       [](const MixerContext& c, const Options& o) { return build_hyper("hypermlp", false, c, o); }},
      {hyper_info("hyperglu", "HyperGLU: HyperMLP with Softplus(scale) * ReLU(L2Norm(gate)) (G labels)",
                  "G-cg-q-12o", true),
       [](const MixerContext& c, const Options& o) { return build_hyper("hyperglu", true, c, o); }},
  };
  return entries;
}

template <typename Entries>
std::vector<ComponentInfo> infos_of(const Entries& entries) {
  std::vector<ComponentInfo> out;
  for (const auto& e : entries) out.push_back(e.info);
  return out;
}

}  // namespace

const std::vector<ComponentInfo>& mixer_infos() {
  static const std::vector<ComponentInfo> infos = infos_of(mixer_entries());
  return infos;
}

Mixer build_mixer(const std::string& spec, const MixerContext& context) {
  const Options options = component_options(mixer_infos(), "mixer", spec);
  const std::string name = Spec::parse(spec).name;
  if (context.raw_values && name != "softmax" && name != "relu" && name != "fem")
    throw Error("mixer " + name + " cannot read raw values (the probe model needs softmax, relu or fem)");
  for (const auto& e : mixer_entries())
    if (e.info.name == name) return e.build(context, options);
  throw std::logic_error("registry: mixer entry vanished");
}

std::string resolve_mixer_spec(const std::string& spec) {
  return component_options(mixer_infos(), "mixer", spec).resolved();
}

const std::vector<ComponentInfo>& channel_mixer_infos() {
  static const std::vector<ComponentInfo> infos = {
      {"swiglu", "W3(SiLU(W1 x) * W2 x), no biases",
       {OptionInfo::integer("hidden", 0, "hidden width (0 = 8/3 width rounded up to 16)", 0)}},
      {"mlp", "W2 GELU(W1 x)",
       {OptionInfo::integer("hidden", 0, "hidden width (0 = 4 x width)", 0),
        OptionInfo::flag("bias", true, "biases in both linears")}},
      {"moe", "mixture of SwiGLU experts, top-k routing, load-balance loss, expert label vectors as biases (ELA)",
       {OptionInfo::integer("experts", 4, "number of experts", 1),
        OptionInfo::integer("top_k", 2, "experts per token", 1),
        OptionInfo::integer("hidden", 0, "expert hidden width (0 = width)", 0),
        OptionInfo::choice("label", "outer", {"none", "outer", "inner"},
                           "label bias: outer sum s_e E_e(x) + l_e, inner sum s_e (E_e(x) + l_e), or none"),
        OptionInfo::choice("label_source", "router", {"router", "separate"},
                           "l_e is the router's weight row e, or a parameter of its own"),
        OptionInfo::real("aux", 0.01, "load-balance loss coefficient", 0.0),
        OptionInfo::flag("skip", false, "add the input to the output (the authors' internal skip)")}},
      {"none", "no channel mixer (blocks hold a sequence mixer only)", {}},
  };
  return infos;
}

ChannelMixer build_channel_mixer(const std::string& spec, int64_t dim) {
  const Options o = component_options(channel_mixer_infos(), "channel mixer", spec);
  const std::string name = Spec::parse(spec).name;
  if (name == "none") return nullptr;
  if (name == "moe") {
    MixtureOfExpertsOptions m;
    m.dim = dim;
    m.experts = o.integer("experts");
    m.top_k = o.integer("top_k");
    m.hidden = o.integer("hidden");
    const std::string label = o.text("label");
    m.label = label == "outer"   ? MixtureOfExpertsOptions::Label::outer
              : label == "inner" ? MixtureOfExpertsOptions::Label::inner
                                 : MixtureOfExpertsOptions::Label::none;
    m.label_from_router = o.text("label_source") == "router";
    m.aux_weight = o.real("aux");
    m.skip = o.flag("skip");
    return std::make_shared<MixtureOfExpertsImpl>(m);
  }
  if (name == "swiglu") {
    const int64_t hidden = o.integer("hidden");
    return std::make_shared<SwiGLUImpl>(dim, hidden > 0 ? hidden : swiglu_default_hidden(dim));
  }
  const int64_t hidden = o.integer("hidden");
  return std::make_shared<MLPImpl>(dim, hidden > 0 ? hidden : 4 * dim, o.flag("bias"));
}

const std::vector<ComponentInfo>& residual_infos() {
  auto momentum_options = [] {
    return std::vector<OptionInfo>{
        OptionInfo::real("beta", 0.9, "momentum coefficient (initial value when learnable)"),
        OptionInfo::real("eta", 1.0, "step size (initial value when learnable)"),
        OptionInfo::flag("learn", true, "beta and eta are learnable parameters"),
        OptionInfo::choice("share", "sublayer", {"sublayer", "layer", "global"},
                           "one (beta, eta) per sublayer, per block, or one for the stack"),
        OptionInfo::choice("norm", "pre", {"pre", "post"},
                           "pre: sublayers normalise their input; post: z <- norm(z + eta m) after each update")};
  };
  static const std::vector<ComponentInfo> infos = {
      {"prenorm", "x <- x + f(norm(x)) for every sublayer (GPT-2 style)", {}},
      {"hyperlink",
       "Hyper-Link (ELA): x <- x + F + lobe(F), F = a + channel(a), a = mixer(norm(x)); no attention residual",
       {OptionInfo::flag("skip", true, "F = a + channel(a) (0: F = channel(a))"),
        OptionInfo::choice("lobe", "none", {"none", "auto", "causal", "bidirectional"},
                           "Memory Lobe over F, an ELA read with its own q/k/v; auto: causal in a causal model, "
                           "bidirectional in an encoder (bidirectional in a causal model sees the future)"),
        OptionInfo::text("lobe_kernel", "hadamard_exp", "the Memory Lobe's ELA kernel")}},
      {"momentum", "MomenMHA: m <- beta m + f(z), z <- z + eta m through every mixer and channel sublayer",
       momentum_options()},
      {"nesterov", "NagMHA: m <- beta m + f(z + beta m), z <- z + eta m (sublayers see the look-ahead)",
       momentum_options()},
  };
  return infos;
}

ResidualScheme build_residual(const std::string& spec, int64_t blocks, int64_t sublayers_per_block) {
  const Options o = component_options(residual_infos(), "residual scheme", spec);
  const std::string name = Spec::parse(spec).name;
  if (name == "prenorm") return std::make_shared<PreNormResidualImpl>();
  if (name == "hyperlink") return std::make_shared<HyperLinkResidualImpl>(o.flag("skip"));
  MomentumResidualOptions m;
  m.nesterov = name == "nesterov";
  m.beta = o.real("beta");
  m.eta = o.real("eta");
  m.learnable = o.flag("learn");
  const std::string share = o.text("share");
  m.sharing = share == "sublayer" ? MomentumResidualOptions::Sharing::sublayer
              : share == "layer"  ? MomentumResidualOptions::Sharing::layer
                                  : MomentumResidualOptions::Sharing::global;
  m.post_norm = o.text("norm") == "post";
  return std::make_shared<MomentumResidualImpl>(m, blocks, sublayers_per_block);
}

std::string memory_lobe_spec(const std::string& residual_spec, bool causal_model) {
  const Options o = component_options(residual_infos(), "residual scheme", residual_spec);
  const std::string lobe = Spec::parse(residual_spec).name == "hyperlink" ? o.text("lobe") : "none";
  if (lobe == "none") return "";
  ops::exact_kernel(o.text("lobe_kernel"));  // unknown kernels fail here, listing the valid ones
  const bool causal = lobe == "causal" || (lobe == "auto" && causal_model);
  return "ela:heads=1,rope=0,out=0,bias=0,kernel=" + o.text("lobe_kernel") + ",causal=" + (causal ? "1" : "0");
}

}  // namespace seqmix
