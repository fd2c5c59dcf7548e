#include "seqmix/layers/linear_attention.h"

#include <torch/torch.h>

#include "seqmix/io/error.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"
#include "seqmix/modules/rotary.h"
#include "seqmix/ops/linear_attention.h"

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
  qkv = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(options.dim, 3 * options.dim)
                                                     .bias(options.bias)));
  out = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(options.dim, options.dim)
                                                     .bias(options.bias)));
  init_linear(qkv);
  init_linear(out);
}

namespace {
struct FeatureQKV {
  torch::Tensor q, k, v;
};
FeatureQKV project(torch::nn::Linear& qkv, const torch::Tensor& x, const LinearAttentionOptions& o,
                   int64_t offset) {
  auto parts = qkv(x).chunk(3, -1);
  auto q = split_heads(parts[0], o.heads), k = split_heads(parts[1], o.heads);
  if (o.rope) {
    q = apply_rotary(q, offset, o.rope_theta);
    k = apply_rotary(k, offset, o.rope_theta);
  }
  return {apply_feature_map(q, o.feature, o.eps), apply_feature_map(k, o.feature, o.eps),
          split_heads(parts[2], o.heads)};
}
}  // namespace

torch::Tensor LinearAttentionImpl::forward(const torch::Tensor& x) {
  check_input(x);
  auto p = project(qkv, x, options_, 0);
  auto read = ops::linear_attention(p.q, p.k, p.v, is_causal(), options_.impl);
  return out(merge_heads(ops::normalised_read(read, options_.eps)));
}

DecodeState LinearAttentionImpl::init_state(int64_t batch) const {
  check_decodable();
  auto s0 = ops::linear_attention_initial_state(batch, options_.heads, head_dim_, head_dim_,
                                                qkv->weight.options());
  DecodeState s;
  s["kv"] = s0.kv;
  s["k_sum"] = s0.k_sum;
  return s;
}

torch::Tensor LinearAttentionImpl::step(const torch::Tensor& x_t, DecodeState& state) {
  check_step_input(x_t);
  auto p = project(qkv, x_t.unsqueeze(1), options_, state.position);
  ops::LinearAttentionState s{state["kv"], state["k_sum"]};
  auto read = ops::linear_attention_step(p.q.squeeze(1), p.k.squeeze(1), p.v.squeeze(1), s);
  state["kv"] = s.kv;
  state["k_sum"] = s.k_sum;
  state.position += 1;
  return out(merge_heads(ops::normalised_read(read, options_.eps))).squeeze(1);
}

}  // namespace seqmix
