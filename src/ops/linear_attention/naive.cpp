// Ground-truth linear attention: the cumulative O(T dk dv) state tensor, plain ATen.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "seqmix/ops/linear_attention.h"

namespace seqmix::ops {

PriorRead linear_attention_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 bool causal) {
  const char* op = "linear_attention_naive";
  check_linear_scan_args(op, q, k, v);
  auto kv = k.unsqueeze(-1) * v.unsqueeze(-2);  // [B,T,H,dk,dv]
  at::Tensor state_kv, state_k;
  if (causal) {
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
