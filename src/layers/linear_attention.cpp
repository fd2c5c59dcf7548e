#include "seqmix/layers/linear_attention.h"

#include "seqmix/layers/mixer_spec.h"
#include "seqmix/ops/linear_attention.h"

#include <torch/torch.h>

#include "priors/prior.h"
#include "seqmix/io/error.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"

namespace seqmix {

LinearAttentionImpl::LinearAttentionImpl(const LinearAttentionOptions& options)
    : MixerImpl("linear", options.dim, options.causal), options_(options) {
  if (options.heads <= 0 || options.dim % options.heads != 0)
    throw Error("mixer linear: width " + std::to_string(options.dim) + " is not divisible by heads=" +
                std::to_string(options.heads));
  if (!is_positive(options.feature))
    throw Error("mixer linear: a normalised read needs a positive feature map (relu or elu)");
  head_dim_ = options.dim / options.heads;
  if (options.rope && head_dim_ % 2 != 0)
    throw Error("mixer linear: rope=1 needs an even head width (got " + std::to_string(head_dim_) + ")");
  // The linear prior in the packed layout: its qkv Linear is this mixer's (q | k | value projection).
  PriorConfig c;
  c.dim = options.dim;
  c.heads = options.heads;
  c.value_head_dim = c.qk_head_dim = head_dim_;
  c.rope = options.rope;
  c.rope_theta = options.rope_theta;
  c.eps = options.eps;
  c.bias = options.bias;
  c.causal = options.causal;
  c.impl = options.impl;
  c.layout = QueryKeyLayout::packed;
  c.feature = options.feature;
  c.floor = options.eps;
  prior_ = prior_declaration("linear").make(c, *this);
  out = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(options.dim, options.dim)
                                                     .bias(options.bias)));
  prior_->init_parameters();
  init_linear(out);
}

torch::Tensor LinearAttentionImpl::forward(const torch::Tensor& x) {
  check_input(x);
  const auto in = prior_->prepare(x, {}, {}, int64_t{0});
  return out(merge_heads(prior_->read(in.values, in)));
}

DecodeState LinearAttentionImpl::init_state(int64_t batch) const {
  check_decodable();
  return DecodeState::of(prior_->init_state(batch, head_dim_));
}

torch::Tensor LinearAttentionImpl::step(const torch::Tensor& x_t, DecodeState& state) {
  check_step_input(x_t);
  const auto in = prior_->prepare(x_t.unsqueeze(1), {}, {}, state.position);
  auto y = prior_->step(in.values.squeeze(1), in, state.data);  // the prior checks the state is its own
  state.position += 1;
  return out(merge_heads(y));
}

namespace {
void place_linear(const MixerContext& context, LinearAttentionOptions& o) { o.dim = context.dim; }
Mixer make_linear(const LinearAttentionOptions& o) { return std::make_shared<LinearAttentionImpl>(o); }
}  // namespace

const MixerDeclaration& linear_mixer_declaration() {
  using O = LinearAttentionOptions;
  static const MixerDeclaration declaration =
      MixerDeclarationOf<O>{
          .name = "linear",
          .meaning = "normalised linear attention with a positive feature map",
          .fields = {Field<O>::integer("heads", &O::heads, "number of heads (must divide the width)", 1),
                     Field<O>::choice("feature", &O::feature, {{"relu", FeatureMap::Relu}, {"elu", FeatureMap::Elu}},
                                      "feature map: ReLU(x)+eps or ELU(x)+1"),
                     Field<O>::real("eps", &O::eps, "feature offset and normaliser floor", 0.0),
                     Field<O>::flag("rope", &O::rope, "rotary position embedding on q and k before the feature map"),
                     Field<O>::real("rope_theta", &O::rope_theta, "RoPE base", 1.0),
                     Field<O>::flag("bias", &O::bias, "biases in the projections"),
                     Field<O>::flag("causal", &O::causal, "causal (decoder) or bidirectional (encoder)"),
                     Field<O>::impl(&O::impl, ops::kLinearAttentionImpls,
                                    "fused kernel or its naive (materialised) twin")},
          .place = place_linear,
          .make = make_linear}
          .erase();
  return declaration;
}

}  // namespace seqmix
