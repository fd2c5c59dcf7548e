#include "seqmix/layers/gated_linear_attention.h"

#include <cmath>

#include <torch/torch.h>

#include "seqmix/io/error.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"
#include "seqmix/modules/rotary.h"
#include "seqmix/ops/gla.h"

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
  qkv = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(options.dim, 3 * options.dim)
                                                     .bias(options.bias)));
  decay = register_module("decay", torch::nn::Linear(torch::nn::LinearOptions(options.dim, options.heads)));
  out = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(options.dim, options.dim)
                                                     .bias(options.bias)));
  init_linear(qkv);
  init_linear(decay);
  init_linear(out);
}

GatedLinearAttentionImpl::Projected GatedLinearAttentionImpl::project(const torch::Tensor& x,
                                                                      int64_t offset) {
  auto parts = qkv(x).chunk(3, -1);
  auto q = split_heads(parts[0], options_.heads), k = split_heads(parts[1], options_.heads);
  if (options_.rope) {
    q = apply_rotary(q, offset, options_.rope_theta);
    k = apply_rotary(k, offset, options_.rope_theta);
  }
  q = apply_feature_map(q, options_.feature, options_.eps);
  k = apply_feature_map(k, options_.feature, options_.eps);
  if (!options_.normalize) q = q / std::sqrt(static_cast<double>(head_dim_));
  auto log_decay = torch::log_sigmoid(decay(x)) / options_.gate_normalizer;
  return {q, k, split_heads(parts[2], options_.heads), log_decay};
}

torch::Tensor GatedLinearAttentionImpl::read_out(const torch::Tensor& numerator,
                                                 const torch::Tensor& normaliser) {
  auto y = options_.normalize ? ops::normalised_read({numerator, normaliser}, options_.eps) : numerator;
  return out(merge_heads(y));
}

torch::Tensor GatedLinearAttentionImpl::forward(const torch::Tensor& x) {
  check_input(x);
  auto p = project(x, 0);
  auto read = ops::gla(p.q, p.k, p.v, p.log_decay, options_.impl);
  return read_out(read.numerator, read.normaliser);
}

DecodeState GatedLinearAttentionImpl::init_state(int64_t batch) const {
  auto s0 = ops::linear_attention_initial_state(batch, options_.heads, head_dim_, head_dim_,
                                                qkv->weight.options());
  DecodeState s;
  s["kv"] = s0.kv;
  s["k_sum"] = s0.k_sum;
  return s;
}

torch::Tensor GatedLinearAttentionImpl::step(const torch::Tensor& x_t, DecodeState& state) {
  check_step_input(x_t);
  auto p = project(x_t.unsqueeze(1), state.position);
  ops::LinearAttentionState s{state["kv"], state["k_sum"]};
  auto read = ops::gla_step(p.q.squeeze(1), p.k.squeeze(1), p.v.squeeze(1), p.log_decay.squeeze(1), s);
  state["kv"] = s.kv;
  state["k_sum"] = s.k_sum;
  state.position += 1;
  return read_out(read.numerator, read.normaliser).squeeze(1);
}

}  // namespace seqmix
