#include "seqmix/layers/kv_attention.h"

#include <torch/torch.h>

#include "seqmix/io/error.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"
#include "seqmix/modules/rotary.h"

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
  const int64_t projected = options.raw_values ? 2 : 3;
  qkv = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(options.dim, projected * options.dim)
                                                     .bias(options.bias)));
  init_linear(qkv);
  if (!options.raw_values) {
    out = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(options.dim, options.dim)
                                                       .bias(options.bias)));
    init_linear(out);
  }
}

KVAttentionImpl::QKV KVAttentionImpl::project(const torch::Tensor& x, int64_t offset) {
  auto parts = qkv(x).chunk(options_.raw_values ? 2 : 3, -1);
  QKV r{split_heads(parts[0], options_.heads), split_heads(parts[1], options_.heads),
        split_heads(options_.raw_values ? x : parts[2], options_.heads)};
  if (options_.rope) {
    r.q = apply_rotary(r.q, offset, options_.rope_theta);
    r.k = apply_rotary(r.k, offset, options_.rope_theta);
  }
  return r;
}

torch::Tensor KVAttentionImpl::forward(const torch::Tensor& x) {
  check_input(x);
  auto p = project(x, 0);
  return output(merge_heads(attend(p.q, p.k, p.v, is_causal())));
}

DecodeState KVAttentionImpl::init_state(int64_t batch) const {
  check_decodable();
  DecodeState s;
  auto empty = torch::zeros({batch, 0, options_.heads, head_dim_}, qkv->weight.options());
  s["k"] = empty;
  s["v"] = empty.clone();
  return s;
}

torch::Tensor KVAttentionImpl::prefill(const torch::Tensor& x, DecodeState& state) {
  check_input(x);
  check_decodable();
  auto p = project(x, state.position);
  state["k"] = torch::cat({state["k"], p.k}, 1);
  state["v"] = torch::cat({state["v"], p.v}, 1);
  state.position += x.size(1);
  return output(merge_heads(attend(p.q, state["k"], state["v"], /*causal=*/true)));
}

torch::Tensor KVAttentionImpl::output(const torch::Tensor& read) { return out ? out(read) : read; }

torch::Tensor KVAttentionImpl::step(const torch::Tensor& x_t, DecodeState& state) {
  check_step_input(x_t);
  return prefill(x_t.unsqueeze(1), state).squeeze(1);
}

}  // namespace seqmix
