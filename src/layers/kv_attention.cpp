#include "seqmix/layers/kv_attention.h"

#include <torch/torch.h>

#include "priors/prior.h"
#include "seqmix/io/error.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"

namespace seqmix {

KVAttentionImpl::KVAttentionImpl(std::string kind, const KVAttentionOptions& options)
    : MixerImpl(std::move(kind), options.dim, options.causal), options_(options) {
  if (options.heads <= 0 || options.dim % options.heads != 0)
    throw Error("mixer " + this->kind() + ": width " + std::to_string(options.dim) +
                " is not divisible by heads=" + std::to_string(options.heads));
  head_dim_ = options.dim / options.heads;
  if (options.rope && head_dim_ % 2 != 0)
    throw Error("mixer " + this->kind() + ": rope=1 needs an even head width (got " +
                std::to_string(head_dim_) + ")");
  // The softmax prior's key-value machinery in the packed layout (its qkv Linear is this mixer's), reading its
  // cache through this mixer's attend.
  PriorConfig c;
  c.dim = options.dim;
  c.heads = options.heads;
  c.value_head_dim = c.qk_head_dim = head_dim_;
  c.rope = options.rope;
  c.rope_theta = options.rope_theta;
  c.bias = options.bias;
  c.causal = options.causal;
  c.layout = QueryKeyLayout::packed;
  c.raw_values = options.raw_values;
  c.cache_mask = false;
  prior_ = make_key_value_prior(c, *this, this->kind(),
                                [this](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       bool causal, const torch::Tensor&) { return attend(q, k, v, causal); });
  prior_->init_parameters();
  if (!options.raw_values) {
    out = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(options.dim, options.dim)
                                                       .bias(options.bias)));
    init_linear(out);
  }
}

torch::Tensor KVAttentionImpl::forward(const torch::Tensor& x) {
  check_input(x);
  const auto in = prior_->prepare(x, {}, {}, int64_t{0});
  return output(merge_heads(prior_->read(in.values, in)));
}

torch::Tensor KVAttentionImpl::forward_packed(const torch::Tensor& x, const torch::Tensor& cu_seqlens) {
  if (!packs_natively()) return MixerImpl::forward_packed(x, cu_seqlens);
  check_packed_input(x, cu_seqlens);
  const auto in = prior_->prepare(x, {}, {}, packed_positions(cu_seqlens, x.size(1)));
  return output(merge_heads(attend_packed(in.q, in.k, in.values, is_causal(), cu_seqlens)));
}

torch::Tensor KVAttentionImpl::attend_packed(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, bool,
                                             const torch::Tensor&) {
  throw Error("mixer " + kind() + " has no packed attention; its forward_packed runs each sequence alone");
}

DecodeState KVAttentionImpl::init_state(int64_t batch) const {
  check_decodable();
  return DecodeState::of(prior_->init_state(batch, head_dim_));
}

torch::Tensor KVAttentionImpl::prefill(const torch::Tensor& x, DecodeState& state) {
  check_input(x);
  check_decodable();
  const auto in = prior_->prepare(x, {}, {}, state.position);
  auto y = prior_->prefill(in.values, in, state.data);  // the prior checks the state is its own
  state.position += x.size(1);
  return output(merge_heads(y));
}

torch::Tensor KVAttentionImpl::output(const torch::Tensor& read) { return out ? out(read) : read; }

torch::Tensor KVAttentionImpl::step(const torch::Tensor& x_t, DecodeState& state) {
  check_step_input(x_t);
  return prefill(x_t.unsqueeze(1), state).squeeze(1);
}

}  // namespace seqmix
