#include "query_key.h"

#include <torch/torch.h>

#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"
#include "seqmix/modules/rotary.h"

namespace seqmix {

at::Tensor modulation_slice(const at::Tensor& modulation, int64_t from, int64_t width) {
  return modulation.defined() ? modulation.narrow(-1, from, width) : at::Tensor();
}

at::Tensor plus_modulation(const at::Tensor& pre, const at::Tensor& modulation) {
  return modulation.defined() ? pre + modulation : pre;
}

torch::nn::Linear make_linear(torch::nn::Module& home, const std::string& name, int64_t in, int64_t out, bool bias) {
  auto l = home.register_module(name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias)));
  init_linear(l);
  return l;
}

void QueryKeyProjection::create(torch::nn::Module& home, const PriorConfig& c) {
  const int64_t w = c.heads * c.qk_head_dim;
  if (c.layout == QueryKeyLayout::packed) {
    const int64_t parts = c.raw_values ? 2 : 3;
    qkv = home.register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(c.dim, parts * w).bias(c.bias)));
  } else {
    query = make_linear(home, "query", c.dim, w, c.bias);
    key = make_linear(home, "key", c.dim, w, c.bias);
  }
}

void QueryKeyProjection::init_parameters() {
  if (qkv) init_linear(qkv);
}

at::TensorOptions QueryKeyProjection::options() const { return (qkv ? qkv : query)->weight.options(); }

QueryKeyProjection::Projected QueryKeyProjection::project(const PriorConfig& c, const at::Tensor& x,
                                                          const at::Tensor& modulation, const Positions& positions) {
  Projected p;
  if (qkv) {
    const auto parts = qkv(x).chunk(c.raw_values ? 2 : 3, -1);
    p.q = split_heads(parts[0], c.heads);
    p.k = split_heads(parts[1], c.heads);
    p.values = split_heads(c.raw_values ? x : parts[2], c.heads);
  } else {
    const int64_t w = c.heads * c.qk_head_dim;
    p.q = split_heads(plus_modulation(query(x), modulation_slice(modulation, 0, w)), c.heads);
    p.k = split_heads(plus_modulation(key(x), modulation_slice(modulation, w, w)), c.heads);
  }
  if (c.rope) {
    std::visit([&](const auto& where) {
      p.q = apply_rotary(p.q, where, c.rope_theta);
      p.k = apply_rotary(p.k, where, c.rope_theta);
    }, positions);
  }
  return p;
}

}  // namespace seqmix
