#pragma once
// What both forms of the second-order reads share (fused.cpp, naive.cpp): the softmax weights over the visible keys
// and the argument checks.
#include <ATen/ATen.h>

#include <initializer_list>
#include <limits>
#include <utility>

#include "../common/checks.h"
#include "seqmix/ops/attention.h"

namespace seqmix::ops::second_order {

// logits [B,H,T,S] -> softmax over the visible keys.
inline at::Tensor probabilities(const at::Tensor& logits, bool causal) {
  const auto visible = visible_keys(logits.size(2), logits.size(3), causal, {}, logits.device());
  auto masked = visible.defined() ? logits.masked_fill(visible.logical_not(), -std::numeric_limits<double>::infinity())
                                  : logits;
  return at::softmax(masked, -1);
}

inline at::Tensor per_head(const at::Tensor& t) { return t.view({1, -1, 1, 1}); }  // [H] -> [1,H,1,1]

// MHA2nd1st's weights p [B,H,T,S] from q [B,H,T,d], k [B,H,S,d].
inline at::Tensor distance_probabilities(const at::Tensor& q, const at::Tensor& k, const at::Tensor& temperature, bool causal) {
  auto logits = at::matmul(q, k.transpose(-1, -2)) - 0.5 * k.square().sum(-1).unsqueeze(-2);
  return probabilities(logits / per_head(temperature), causal);
}

// The per-head parameters are (name, tensor) pairs, each required [H].
inline void check_second_order(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        std::initializer_list<std::pair<const char*, at::Tensor>> per_head_parameters) {
  check_attention_args(op, q, k, v);
  for (const auto& parameter : per_head_parameters) {
    const at::Tensor& t = parameter.second;
    check_rank(t, op, parameter.first, 1, "H");
    TORCH_CHECK(t.size(0) == q.size(2), op, ": per-head parameters must have ", q.size(2), " entries (got ",
                t.size(0), " in ", parameter.first, ")");
  }
}

}  // namespace seqmix::ops::second_order
