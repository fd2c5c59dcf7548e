// The built-in components and their options. The mixers are the list of their declarations (each beside its
// layer: include/seqmix/layers/mixer_spec.h); channel mixers and residual schemes are declared here.
#include "seqmix/models/registry.h"

#include <functional>

#include <torch/torch.h>

#include "seqmix/io/built_within_limits.h"
#include "seqmix/io/error.h"
#include "seqmix/layers/delta_rule.h"
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

namespace seqmix {

const std::vector<const MixerDeclaration*>& mixer_declarations() {
  static const std::vector<const MixerDeclaration*> declarations = {
      &softmax_mixer_declaration(),   &relu_mixer_declaration(),      &linear_mixer_declaration(),
      &ela_mixer_declaration(),       &gla_mixer_declaration(),       &ssm_mixer_declaration(),
      &fem_mixer_declaration(),       &energy_mixer_declaration(),    &mha2nd1st_mixer_declaration(),
      &light2nd1st_mixer_declaration(), &hypermlp_mixer_declaration(), &hyperglu_mixer_declaration(),
      &delta_mixer_declaration(),
  };
  return declarations;
}

const std::vector<ComponentInfo>& mixer_infos() {
  static const std::vector<ComponentInfo> infos = [] {
    std::vector<ComponentInfo> out;
    for (const auto* d : mixer_declarations()) out.push_back(d->info);
    return out;
  }();
  return infos;
}

MixerSpec parse_mixer_spec(const std::string& spec) {
  const Spec parsed = Spec::parse(spec);
  const ComponentInfo& info = find_component(mixer_infos(), "mixer", parsed.name);
  const Options options("mixer " + info.name, info.options, parsed);
  for (const auto* d : mixer_declarations())
    if (d->info.name == info.name) return MixerSpec{d, d->parse(options), options.resolved()};
  throw std::logic_error("registry: mixer declaration vanished");
}

MixerSpec::MixerSpec(const std::string& text) : MixerSpec(parse_mixer_spec(text)) {}

Mixer build_mixer(const MixerSpec& spec, const MixerContext& context) {
  if (context.raw_values && !spec.declaration->reads_raw_values)
    throw Error("mixer " + spec.name() + " cannot read raw values (the probe model needs softmax, relu or fem)");
  return built_within_limits("mixer " + spec.resolved,
                             [&] { return spec.declaration->build(spec.options, context); });
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
       {OptionInfo::integer("experts", 4, "number of experts", 1, 4096),
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

namespace {
ChannelMixer make_channel_mixer(const std::string& spec, int64_t dim) {
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
}  // namespace

ChannelMixer build_channel_mixer(const std::string& spec, int64_t dim) {
  return built_within_limits("channel mixer " + spec, [&] { return make_channel_mixer(spec, dim); });
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

namespace {
ResidualScheme make_residual(const std::string& spec, int64_t blocks, int64_t sublayers_per_block) {
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
}  // namespace

ResidualScheme build_residual(const std::string& spec, int64_t blocks, int64_t sublayers_per_block) {
  return built_within_limits("residual scheme " + spec,
                             [&] { return make_residual(spec, blocks, sublayers_per_block); });
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
