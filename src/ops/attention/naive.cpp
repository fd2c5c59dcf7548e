// Ground-truth attention: plain ATen, the full score matrix, autograd by composition.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "../common/packing.h"
#include "../common/padding.h"
#include "seqmix/ops/attention.h"

namespace seqmix::ops {
namespace {

// [B,H,T,S] raw scores q_t . k_j.
at::Tensor raw_scores(const at::Tensor& q, const at::Tensor& k) {
  return at::matmul(q.transpose(1, 2), k.permute({0, 2, 3, 1}));
}

}  // namespace

at::Tensor causal_key_mask(int64_t queries, int64_t keys, const at::Device& device) {
  TORCH_CHECK(0 <= queries && queries <= keys, "causal_key_mask: needs 0 <= queries <= keys (got ", queries,
              " queries and ", keys, " keys); queries are the last positions of the key sequence");
  auto opts = at::TensorOptions().dtype(at::kLong).device(device);
  auto t = at::arange(queries, opts).unsqueeze(1) + (keys - queries);
  auto j = at::arange(keys, opts).unsqueeze(0);
  return j <= t;
}

at::Tensor visible_keys(int64_t queries, int64_t keys, bool causal, const at::Tensor& key_mask,
                        const at::Device& device, const at::Tensor& cu_seqlens) {
  TORCH_CHECK(0 <= queries && queries <= keys, "visible_keys: needs 0 <= queries <= keys (got ", queries,
              " queries and ", keys, " keys); queries are the last positions of the key sequence");
  if (cu_seqlens.defined()) {
    TORCH_CHECK(!key_mask.defined() && queries == keys,
                "visible_keys: packed sequences (cu_seqlens) take neither a key_mask nor a cache (T == S)");
    check_cu_seqlens("visible_keys", cu_seqlens, 1, keys);
    const auto ids = sequence_ids(cu_seqlens, keys).to(device);
    auto same = ids.unsqueeze(1) == ids.unsqueeze(0);  // [T,T]: query and key in one sequence
    if (causal) same = same & causal_key_mask(queries, keys, device);
    return same.view({1, 1, queries, keys});
  }
  if (!key_mask.defined()) return causal ? causal_key_mask(queries, keys, device).view({1, 1, queries, keys}) : at::Tensor();
  TORCH_CHECK(key_mask.dim() == 2 && key_mask.size(1) == keys && key_mask.scalar_type() == at::kBool,
              "visible_keys: key_mask must be a bool tensor [B,", keys, "] (got ", key_mask.scalar_type(), " ", key_mask.sizes(), ")");
  auto allowed = key_mask.view({key_mask.size(0), 1, 1, keys});
  if (causal) allowed = allowed & causal_key_mask(queries, keys, device).view({1, 1, queries, keys});
  else allowed = allowed.expand({key_mask.size(0), 1, queries, keys});
  // The own position of query t is key t + S - T.
  auto diag = at::zeros({queries, keys}, at::TensorOptions().dtype(at::kBool).device(device));
  diag.diagonal(keys - queries).fill_(true);
  const auto empty = allowed.any(-1, /*keepdim=*/true).logical_not();
  return allowed | (empty & diag.view({1, 1, queries, keys}));
}

at::Tensor softmax_attention_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   bool causal, double scale, const at::Tensor& key_mask, const at::Tensor& cu_seqlens) {
  const char* op = "softmax_attention_naive";
  check_attention_args(op, q, k, v);
  check_key_mask(op, key_mask, k.size(0), k.size(1));
  check_packed_attention(op, q, k, key_mask, cu_seqlens);
  check_scale(op, scale);
  const AttentionInputs in = finite_masked_positions(op, q, k, v, key_mask);
  auto scores = raw_scores(in.q, in.k) * scale;
  const auto visible = visible_keys(q.size(1), k.size(1), causal, key_mask, q.device(), cu_seqlens);
  if (visible.defined())
    scores = scores.masked_fill(visible.logical_not(), -std::numeric_limits<double>::infinity());
  auto p = at::softmax(scores, -1);
  return at::matmul(p, in.v.transpose(1, 2)).transpose(1, 2);
}

at::Tensor relu_attention_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                bool causal, double eps) {
  const char* op = "relu_attention_naive";
  check_attention_args(op, q, k, v);
  check_eps(op, eps);
  return causal_outputs(causal, {k, v}, q, {}, [&](const Window& w) {
    const auto qw = w.queries(q, k), kw = w.keys(k), vw = w.keys(v);
    auto scores = raw_scores(qw, kw);
    // Invisible keys are exact zeros, so they add nothing to the row norm.
    if (causal)
      scores = scores.masked_fill(causal_key_mask(qw.size(1), kw.size(1), qw.device()).logical_not(), 0.0);
    auto norm = (scores.square().sum(-1, /*keepdim=*/true) + eps).sqrt();
    auto a = at::relu(scores / norm);
    return std::vector<at::Tensor>{at::matmul(a, vw.transpose(1, 2)).transpose(1, 2)};
  })[0];
}

}  // namespace seqmix::ops
