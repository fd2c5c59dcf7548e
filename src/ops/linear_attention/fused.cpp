// Linear attention with O(T d) memory: the causal read is GLA's chunked scan with zero decay, the
// bidirectional read contracts the keys and values once per head.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "seqmix/ops/gla.h"
#include "seqmix/ops/linear_attention.h"

namespace seqmix::ops {

PriorRead linear_attention_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
  const char* op = "linear_attention_fused";
  check_linear_scan_args(op, q, k, v);
  if (causal) {
    check_kernel_inputs(op, {q, k, v});  // so the error names this op, not gla_fused
    return gla_fused(q, k, v, at::zeros(q.sizes().slice(0, 3), q.options()));
  }
  auto kv = at::einsum("bthd,bthe->bhde", {k, v});  // [B,H,dk,dv]
  auto k_sum = k.sum(1);                             // [B,H,dk]
  PriorRead read;
  read.numerator = at::einsum("bthd,bhde->bthe", {q, kv});
  read.normaliser = (q * k_sum.unsqueeze(1)).sum(-1);
  return read;
}

}  // namespace seqmix::ops
