#include "seqmix/layers/prior_mixer.h"

#include <torch/torch.h>

#include "priors/prior.h"
#include "seqmix/io/error.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"

namespace seqmix {

PriorMixerImpl::PriorMixerImpl(const std::string& kind, const PriorMixerOptions& shared, bool causal)
    : MixerImpl(kind, shared.dim, causal), heads_(shared.heads), shared_(shared) {
  const int64_t dim = shared.dim, heads = shared.heads;
  if (heads <= 0 || dim % heads != 0)
    throw Error("mixer " + kind + ": width " + std::to_string(dim) + " is not divisible by heads=" +
                std::to_string(heads));
  head_dim_ = dim / heads;
  if (shared.rope && head_dim_ % 2 != 0)
    throw Error("mixer " + kind + ": rope=1 needs an even head width (got " + std::to_string(head_dim_) + ")");
}

void PriorMixerImpl::create(const std::string& prior, PriorConfig config) {
  config.dim = dim();
  config.heads = heads_;
  config.value_head_dim = config.qk_head_dim = head_dim_;
  config.rope = shared_.rope;
  config.rope_theta = shared_.rope_theta;
  config.bias = shared_.bias;
  config.impl = shared_.impl;
  config.causal = is_causal();
  config.layout = QueryKeyLayout::packed;
  prior_ = build_prior(prior, config, *this);
  out = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(dim(), dim()).bias(shared_.bias)));
  prior_->init_parameters();
  init_linear(out);
}

torch::Tensor PriorMixerImpl::forward(const torch::Tensor& x) {
  check_input(x);
  const auto in = prior_->prepare(x, {}, {}, int64_t{0});
  return out(merge_heads(prior_->read_in_float32(in.values, in)));
}

bool PriorMixerImpl::packs_natively() const { return prior_->reads_packed(); }

torch::Tensor PriorMixerImpl::forward_packed(const torch::Tensor& x, const torch::Tensor& cu_seqlens) {
  if (!packs_natively()) return MixerImpl::forward_packed(x, cu_seqlens);
  check_packed_input(x, cu_seqlens);
  auto in = prior_->prepare(x, {}, {}, packed_positions(cu_seqlens, x.size(1)));
  in.cu_seqlens = cu_seqlens;
  return out(merge_heads(prior_->read_in_float32(in.values, in)));
}

DecodeState PriorMixerImpl::init_state(int64_t batch) const {
  check_decodable();
  return DecodeState::of(prior_->init_state(batch, head_dim_));
}

torch::Tensor PriorMixerImpl::step(const torch::Tensor& x_t, DecodeState& state) {
  check_step_input(x_t);
  const auto in = prior_->prepare(x_t.unsqueeze(1), {}, {}, state.position);
  auto y = prior_->step_in_float32(in.values.squeeze(1), in, state.data);  // the prior checks the state is its own
  state.position += 1;
  return out(merge_heads(y));
}

}  // namespace seqmix
