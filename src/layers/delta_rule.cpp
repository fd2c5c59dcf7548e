#include "seqmix/layers/delta_rule.h"

#include <torch/torch.h>

#include "priors/prior.h"
#include "seqmix/io/error.h"
#include "seqmix/layers/mixer_spec.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"
#include "seqmix/ops/delta.h"

namespace seqmix {

DeltaRuleImpl::DeltaRuleImpl(const DeltaRuleOptions& options)
    : MixerImpl("delta", options.dim, /*causal=*/true), options_(options) {
  if (options.heads <= 0 || options.dim % options.heads != 0)
    throw Error("mixer delta: width " + std::to_string(options.dim) + " is not divisible by heads=" +
                std::to_string(options.heads));
  head_dim_ = options.dim / options.heads;
  if (options.rope && head_dim_ % 2 != 0)
    throw Error("mixer delta: rope=1 needs an even head width (got " + std::to_string(head_dim_) + ")");
  // The delta prior in the packed layout: its qkv and write Linears are this mixer's.
  PriorConfig c;
  c.dim = options.dim;
  c.heads = options.heads;
  c.value_head_dim = c.qk_head_dim = head_dim_;
  c.rope = options.rope;
  c.rope_theta = options.rope_theta;
  c.bias = options.bias;
  c.impl = options.impl;
  c.layout = QueryKeyLayout::packed;
  c.normalize = false;  // DeltaNet's read: the numerator S^T q
  prior_ = prior_declaration("delta").make(c, *this);
  out = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(options.dim, options.dim)
                                                     .bias(options.bias)));
  prior_->init_parameters();
  init_linear(out);
}

torch::Tensor DeltaRuleImpl::forward(const torch::Tensor& x) {
  check_input(x);
  const auto in = prior_->prepare(x, {}, {}, int64_t{0});
  return out(merge_heads(prior_->read(in.values, in)));
}

DecodeState DeltaRuleImpl::init_state(int64_t batch) const {
  return DecodeState::of(prior_->init_state(batch, head_dim_));
}

torch::Tensor DeltaRuleImpl::step(const torch::Tensor& x_t, DecodeState& state) {
  check_step_input(x_t);
  const auto in = prior_->prepare(x_t.unsqueeze(1), {}, {}, state.position);
  auto y = prior_->step(in.values.squeeze(1), in, state.data);  // the prior checks the state is its own
  state.position += 1;
  return out(merge_heads(y));
}

namespace {
void place_delta(const MixerContext& context, DeltaRuleOptions& o) { o.dim = context.dim; }
Mixer make_delta(const DeltaRuleOptions& o) { return std::make_shared<DeltaRuleImpl>(o); }
}  // namespace

const MixerDeclaration& delta_mixer_declaration() {
  using O = DeltaRuleOptions;
  static const MixerDeclaration declaration =
      MixerDeclarationOf<O>{
          .name = "delta",
          .meaning = "the delta rule (DeltaNet): a fast-weight state corrected towards each value (causal)",
          .fields = {Field<O>::integer("heads", &O::heads, "number of heads (must divide the width)", 1),
                     Field<O>::flag("rope", &O::rope, "rotary position embedding on q and k"),
                     Field<O>::real("rope_theta", &O::rope_theta, "RoPE base", 1.0),
                     Field<O>::flag("bias", &O::bias, "biases in the q/k/v, write and output projections"),
                     Field<O>::impl(&O::impl, ops::kDeltaRuleImpls,
                                    "the parallel form (naive); decoding runs the recurrence")},
          .place = place_delta,
          .make = make_delta}
          .erase();
  return declaration;
}

}  // namespace seqmix
