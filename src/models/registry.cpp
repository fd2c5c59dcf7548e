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

const std::vector<MixerDeclaration>& mixer_declarations() {
  static const std::vector<MixerDeclaration> declarations = {
      softmax_mixer_declaration(),     relu_mixer_declaration(),     linear_mixer_declaration(),
      ela_mixer_declaration(),         gla_mixer_declaration(),      ssm_mixer_declaration(),
      fem_mixer_declaration(),         energy_mixer_declaration(),   mha2nd1st_mixer_declaration(),
      light2nd1st_mixer_declaration(), hypermlp_mixer_declaration(), hyperglu_mixer_declaration(),
      delta_mixer_declaration(),
  };
  return declarations;
}

const std::vector<ComponentInfo>& mixer_infos() {
  static const std::vector<ComponentInfo> infos = component_infos(mixer_declarations());
  return infos;
}

MixerSpec parse_mixer_spec(const std::string& spec) { return MixerSpec(parse_spec(mixer_declarations(), "mixer", spec)); }

MixerSpec::MixerSpec(const std::string& text) : MixerSpec(parse_mixer_spec(text)) {}

Mixer build_mixer(const MixerSpec& spec, const MixerContext& context) {
  return built_within_limits("mixer " + spec.text, [&] {
    try {
      return spec.build(context);
    } catch (const NoRawValueRead&) {
      throw Error("mixer " + spec.name() + " cannot read raw values (the probe model needs softmax, relu or fem)");
    }
  });
}

std::string resolve_mixer_spec(const std::string& spec) {
  return component_options(mixer_infos(), "mixer", spec).resolved();
}

namespace {

ChannelMixer make_swiglu(const SwiGLUOptions& o, int64_t dim) {
  return std::make_shared<SwiGLUImpl>(dim, o.hidden > 0 ? o.hidden : swiglu_default_hidden(dim));
}
ChannelMixer make_mlp(const MLPOptions& o, int64_t dim) {
  return std::make_shared<MLPImpl>(dim, o.hidden > 0 ? o.hidden : 4 * dim, o.bias);
}
ChannelMixer make_moe(const MixtureOfExpertsOptions& o, int64_t dim) {
  MixtureOfExpertsOptions placed = o;
  placed.dim = dim;
  return std::make_shared<MixtureOfExpertsImpl>(placed);
}
ChannelMixer make_no_channel_mixer(const NoOptions&, int64_t) { return nullptr; }

}  // namespace

const std::vector<ChannelMixerDeclaration>& channel_mixer_declarations() {
  using Moe = MixtureOfExpertsOptions;
  using Label = MixtureOfExpertsOptions::Label;
  static const std::vector<ChannelMixerDeclaration> declarations = {
      DeclarationOf<SwiGLUOptions, ChannelMixer, int64_t>{
          .name = "swiglu",
          .meaning = "W3(SiLU(W1 x) * W2 x), no biases",
          .fields = {Field<SwiGLUOptions>::integer("hidden", &SwiGLUOptions::hidden,
                                                   "hidden width (0 = 8/3 width rounded up to 16)", 0)},
          .make = make_swiglu}
          .erase(),
      DeclarationOf<MLPOptions, ChannelMixer, int64_t>{
          .name = "mlp",
          .meaning = "W2 GELU(W1 x)",
          .fields = {Field<MLPOptions>::integer("hidden", &MLPOptions::hidden, "hidden width (0 = 4 x width)", 0),
                     Field<MLPOptions>::flag("bias", &MLPOptions::bias, "biases in both linears")},
          .make = make_mlp}
          .erase(),
      DeclarationOf<Moe, ChannelMixer, int64_t>{
          .name = "moe",
          .meaning =
              "mixture of SwiGLU experts, top-k routing, load-balance loss, expert label vectors as biases (ELA)",
          .fields =
              {Field<Moe>::integer("experts", &Moe::experts, "number of experts", 1, 4096),
               Field<Moe>::integer("top_k", &Moe::top_k, "experts per token", 1),
               Field<Moe>::integer("hidden", &Moe::hidden, "expert hidden width (0 = width)", 0),
               Field<Moe>::choice("label", &Moe::label,
                                  {{"none", Label::none}, {"outer", Label::outer}, {"inner", Label::inner}},
                                  "label bias: outer sum s_e E_e(x) + l_e, inner sum s_e (E_e(x) + l_e), or none"),
               Field<Moe>::choice("label_source", &Moe::label_from_router, {{"router", true}, {"separate", false}},
                                  "l_e is the router's weight row e, or a parameter of its own"),
               Field<Moe>::real("aux", &Moe::aux_weight, "load-balance loss coefficient", 0.0),
               Field<Moe>::flag("skip", &Moe::skip, "add the input to the output (the authors' internal skip)")},
          .make = make_moe}
          .erase(),
      DeclarationOf<NoOptions, ChannelMixer, int64_t>{
          .name = "none", .meaning = "no channel mixer (blocks hold a sequence mixer only)", .make = make_no_channel_mixer}
          .erase(),
  };
  return declarations;
}

const std::vector<ComponentInfo>& channel_mixer_infos() {
  static const std::vector<ComponentInfo> infos = component_infos(channel_mixer_declarations());
  return infos;
}

ChannelMixerSpec::ChannelMixerSpec(const std::string& text)
    : ParsedSpec(parse_spec(channel_mixer_declarations(), "channel mixer", text)) {}

ChannelMixer build_channel_mixer(const ChannelMixerSpec& spec, int64_t dim) {
  return built_within_limits("channel mixer " + spec.source, [&] { return spec.build(dim); });
}

namespace {

ResidualScheme make_prenorm(const NoOptions&, int64_t, int64_t) { return std::make_shared<PreNormResidualImpl>(); }
ResidualScheme make_hyper_link(const HyperLinkOptions& o, int64_t, int64_t) {
  return std::make_shared<HyperLinkResidualImpl>(o.skip);
}
void check_hyper_link(const HyperLinkOptions& o) {
  if (o.lobe != "none") ops::exact_kernel(o.lobe_kernel);  // an unknown kernel fails here, listing the valid ones
}
ResidualScheme make_momentum(const MomentumResidualOptions& o, int64_t blocks, int64_t sublayers_per_block) {
  return std::make_shared<MomentumResidualImpl>(o, blocks, sublayers_per_block);
}
ResidualScheme make_nesterov(const MomentumResidualOptions& o, int64_t blocks, int64_t sublayers_per_block) {
  MomentumResidualOptions nesterov = o;
  nesterov.nesterov = true;
  return std::make_shared<MomentumResidualImpl>(nesterov, blocks, sublayers_per_block);
}

std::vector<Field<MomentumResidualOptions>> momentum_fields() {
  using M = MomentumResidualOptions;
  using Sharing = MomentumResidualOptions::Sharing;
  return {Field<M>::real("beta", &M::beta, "momentum coefficient (initial value when learnable)"),
          Field<M>::real("eta", &M::eta, "step size (initial value when learnable)"),
          Field<M>::flag("learn", &M::learnable, "beta and eta are learnable parameters"),
          Field<M>::choice("share", &M::sharing,
                           {{"sublayer", Sharing::sublayer}, {"layer", Sharing::layer}, {"global", Sharing::global}},
                           "one (beta, eta) per sublayer, per block, or one for the stack"),
          Field<M>::choice("norm", &M::post_norm, {{"pre", false}, {"post", true}},
                           "pre: sublayers normalise their input; post: z <- norm(z + eta m) after each update")};
}

}  // namespace

const std::vector<ResidualDeclaration>& residual_declarations() {
  using H = HyperLinkOptions;
  using Momentum = DeclarationOf<MomentumResidualOptions, ResidualScheme, int64_t, int64_t>;
  static const std::vector<ResidualDeclaration> declarations = {
      DeclarationOf<NoOptions, ResidualScheme, int64_t, int64_t>{
          .name = "prenorm", .meaning = "x <- x + f(norm(x)) for every sublayer (GPT-2 style)", .make = make_prenorm}
          .erase(),
      DeclarationOf<H, ResidualScheme, int64_t, int64_t>{
          .name = "hyperlink",
          .meaning = "Hyper-Link (ELA): x <- x + F + lobe(F), F = a + channel(a), a = mixer(norm(x)); no attention "
                     "residual",
          .fields = {Field<H>::flag("skip", &H::skip, "F = a + channel(a) (0: F = channel(a))"),
                     Field<H>::choice("lobe", &H::lobe, std::vector<std::string>{"none", "auto", "causal", "bidirectional"},
                                      "Memory Lobe over F, an ELA read with its own q/k/v; auto: causal in a causal "
                                      "model, bidirectional in an encoder (bidirectional in a causal model sees the "
                                      "future)"),
                     Field<H>::text("lobe_kernel", &H::lobe_kernel, "the Memory Lobe's ELA kernel")},
          .make = make_hyper_link,
          .check = check_hyper_link}
          .erase(),
      Momentum{.name = "momentum",
               .meaning = "MomenMHA: m <- beta m + f(z), z <- z + eta m through every mixer and channel sublayer",
               .fields = momentum_fields(),
               .make = make_momentum}
          .erase(),
      Momentum{.name = "nesterov",
               .meaning = "NagMHA: m <- beta m + f(z + beta m), z <- z + eta m (sublayers see the look-ahead)",
               .fields = momentum_fields(),
               .make = make_nesterov}
          .erase(),
  };
  return declarations;
}

const std::vector<ComponentInfo>& residual_infos() {
  static const std::vector<ComponentInfo> infos = component_infos(residual_declarations());
  return infos;
}

ResidualSpec::ResidualSpec(const std::string& text)
    : ParsedSpec(parse_spec(residual_declarations(), "residual scheme", text)) {}

ResidualScheme build_residual(const ResidualSpec& spec, int64_t blocks, int64_t sublayers_per_block) {
  return built_within_limits("residual scheme " + spec.source,
                             [&] { return spec.build(blocks, sublayers_per_block); });
}

Mixer build_memory_lobe(const ResidualSpec& residual, int64_t dim, bool causal_model) {
  if (residual.name() != "hyperlink") return nullptr;
  const auto& hyper_link = std::any_cast<const HyperLinkOptions&>(residual.options);
  if (hyper_link.lobe == "none") return nullptr;
  ExactLinearAttentionOptions lobe;
  lobe.dim = dim;
  lobe.heads = 1;
  lobe.rope = false;
  lobe.output = false;
  lobe.bias = false;
  lobe.kernel = hyper_link.lobe_kernel;
  lobe.causal = hyper_link.lobe == "causal" || (hyper_link.lobe == "auto" && causal_model);
  return built_within_limits("the Memory Lobe of residual scheme " + residual.source,
                             [&] { return std::make_shared<ExactLinearAttentionImpl>(lobe); });
}

}  // namespace seqmix
