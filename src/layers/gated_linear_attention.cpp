#include "seqmix/layers/gated_linear_attention.h"

#include "seqmix/layers/mixer_spec.h"
#include "seqmix/ops/gla.h"

#include <torch/torch.h>

#include "priors/prior.h"
#include "seqmix/io/error.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"

namespace seqmix {

GatedLinearAttentionImpl::GatedLinearAttentionImpl(const GatedLinearAttentionOptions& options)
    : MixerImpl("gla", options.dim, /*causal=*/true), options_(options) {
  if (options.heads <= 0 || options.dim % options.heads != 0)
    throw Error("mixer gla: width " + std::to_string(options.dim) + " is not divisible by heads=" +
                std::to_string(options.heads));
  if (options.normalize && !is_positive(options.feature))
    throw Error("mixer gla: normalize=1 needs a positive feature map (relu or elu)");
  if (options.gate_normalizer <= 0) throw Error("mixer gla: gate_normalizer must be positive");
  head_dim_ = options.dim / options.heads;
  if (options.rope && head_dim_ % 2 != 0)
    throw Error("mixer gla: rope=1 needs an even head width (got " + std::to_string(head_dim_) + ")");
  // The gla prior in the packed layout: its qkv and decay Linears are this mixer's.
  PriorConfig c;
  c.dim = options.dim;
  c.heads = options.heads;
  c.value_head_dim = c.qk_head_dim = head_dim_;
  c.rope = options.rope;
  c.rope_theta = options.rope_theta;
  c.gate_normalizer = options.gate_normalizer;
  c.eps = options.eps;
  c.bias = options.bias;
  c.impl = options.impl;
  c.layout = QueryKeyLayout::packed;
  c.feature = options.feature;
  c.floor = options.eps;
  c.normalize = options.normalize;
  prior_ = prior_declaration("gla").make(c, *this);
  out = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(options.dim, options.dim)
                                                     .bias(options.bias)));
  prior_->init_parameters();
  init_linear(out);
}

torch::Tensor GatedLinearAttentionImpl::forward(const torch::Tensor& x) {
  check_input(x);
  const auto in = prior_->prepare(x, {}, {}, int64_t{0});
  return out(merge_heads(prior_->read(in.values, in)));
}

DecodeState GatedLinearAttentionImpl::init_state(int64_t batch) const {
  return DecodeState::of(prior_->init_state(batch, head_dim_));
}

torch::Tensor GatedLinearAttentionImpl::step(const torch::Tensor& x_t, DecodeState& state) {
  check_step_input(x_t);
  const auto in = prior_->prepare(x_t.unsqueeze(1), {}, {}, state.position);
  auto y = prior_->step(in.values.squeeze(1), in, state.data);  // the prior checks the state is its own
  state.position += 1;
  return out(merge_heads(y));
}

namespace {
void place_gla(const MixerContext& context, GatedLinearAttentionOptions& o) { o.dim = context.dim; }
Mixer make_gla(const GatedLinearAttentionOptions& o) { return std::make_shared<GatedLinearAttentionImpl>(o); }
}  // namespace

const MixerDeclaration& gla_mixer_declaration() {
  using O = GatedLinearAttentionOptions;
  static const MixerDeclaration declaration =
      MixerDeclarationOf<O>{
          .name = "gla",
          .meaning = "gated linear attention with a data-dependent decay per head (causal)",
          .fields = {Field<O>::integer("heads", &O::heads, "number of heads (must divide the width)", 1),
                     Field<O>::choice("feature", &O::feature,
                                      {{"relu", FeatureMap::Relu}, {"elu", FeatureMap::Elu},
                                       {"identity", FeatureMap::Identity}},
                                      "feature map on q and k (identity only with normalize=0)"),
                     Field<O>::flag("normalize", &O::normalize, "divide by the decayed normaliser (a decayed average)"),
                     Field<O>::real("gate_normalizer", &O::gate_normalizer, "divides the log decay logsigmoid(w.x+b)",
                                    1e-6),
                     Field<O>::real("eps", &O::eps, "feature offset and normaliser floor", 0.0),
                     Field<O>::flag("rope", &O::rope, "rotary position embedding on q and k"),
                     Field<O>::real("rope_theta", &O::rope_theta, "RoPE base", 1.0),
                     Field<O>::flag("bias", &O::bias, "biases in the q/k/v and output projections"),
                     Field<O>::impl(&O::impl, ops::kGlaImpls, "fused kernel or its naive (materialised) twin")},
          .place = place_gla,
          .make = make_gla}
          .erase();
  return declaration;
}

}  // namespace seqmix
