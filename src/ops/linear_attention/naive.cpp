// Ground-truth linear attention: the cumulative O(T dk dv) state tensor, plain ATen.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "../common/packing.h"
#include "seqmix/ops/linear_attention.h"

namespace seqmix::ops {

namespace {

// Packed: the sums of x [1,T,...] over each position's sequence, up to the position (causal) or whole, from one
// cumulative sum with a zero in front: prefix[end] - prefix[first of the sequence].
at::Tensor sequence_sums(const at::Tensor& x, const at::Tensor& cu_seqlens, bool causal) {
  const int64_t T = x.size(1);
  const auto prefix = at::cat({at::zeros_like(x.narrow(1, 0, 1)), x.cumsum(1)}, 1);  // [1,T+1,...]
  const auto ids = sequence_ids(cu_seqlens, T);
  const auto first = cu_seqlens.index_select(0, ids);
  const auto end = causal ? at::arange(1, T + 1, cu_seqlens.options()) : cu_seqlens.index_select(0, ids + 1);
  return prefix.index_select(1, end) - prefix.index_select(1, first);
}

}  // namespace

PriorRead linear_attention_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 bool causal, const at::Tensor& cu_seqlens) {
  const char* op = "linear_attention_naive";
  check_linear_scan_args(op, q, k, v);
  check_cu_seqlens(op, cu_seqlens, q.size(0), q.size(1));
  auto kv = k.unsqueeze(-1) * v.unsqueeze(-2);  // [B,T,H,dk,dv]
  at::Tensor state_kv, state_k;
  if (cu_seqlens.defined()) {
    state_kv = sequence_sums(kv, cu_seqlens, causal);
    state_k = sequence_sums(k, cu_seqlens, causal);
  } else if (causal) {
    state_kv = kv.cumsum(1);
    state_k = k.cumsum(1);
  } else {
    state_kv = kv.sum(1, /*keepdim=*/true).expand_as(kv);
    state_k = k.sum(1, /*keepdim=*/true).expand_as(k);
  }
  PriorRead read;
  read.numerator = (q.unsqueeze(-1) * state_kv).sum(-2);
  read.normaliser = (q * state_k).sum(-1);
  return read;
}

}  // namespace seqmix::ops
