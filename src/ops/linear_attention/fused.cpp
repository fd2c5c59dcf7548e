// Linear attention with O(T d) memory: the causal read is GLA's chunked scan with zero decay, the
// bidirectional read contracts the keys and values once per head (per sequence when packed).
#include <ATen/ATen.h>

#include <vector>

#include "../common/checks.h"
#include "../common/packing.h"
#include "seqmix/ops/gla.h"
#include "seqmix/ops/linear_attention.h"

namespace seqmix::ops {

PriorRead linear_attention_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                 const at::Tensor& cu_seqlens) {
  const char* op = "linear_attention_fused";
  check_linear_scan_args(op, q, k, v);
  check_cu_seqlens(op, cu_seqlens, q.size(0), q.size(1));
  if (causal) {
    // On the CPU, so the error names this op, not gla_fused; a GPU kernel checks its own inputs.
    if (q.device().is_cpu()) check_kernel_inputs(op, {q, k, v});
    return gla_fused(q, k, v, at::zeros(q.sizes().slice(0, 3), q.options()), cu_seqlens);
  }
  if (cu_seqlens.defined()) {
    // Bidirectional and packed: each sequence contracts its own keys and values, [1,l,H,d] slices.
    std::vector<at::Tensor> numerators, normalisers;
    for (const Segment& s : sequence_segments(cu_seqlens, q.size(1))) {
      const auto part = [&](const at::Tensor& x) { return x.narrow(1, s.begin, s.end - s.begin); };
      const PriorRead r = linear_attention_fused(part(q), part(k), part(v), false);
      numerators.push_back(r.numerator);
      normalisers.push_back(r.normaliser);
    }
    return {at::cat(numerators, 1), at::cat(normalisers, 1)};
  }
  auto kv = at::einsum("bthd,bthe->bhde", {k, v});  // [B,H,dk,dv]
  auto k_sum = k.sum(1);                             // [B,H,dk]
  PriorRead read;
  read.numerator = at::einsum("bthd,bhde->bthe", {q, kv});
  read.normaliser = (q * k_sum.unsqueeze(1)).sum(-1);
  return read;
}

}  // namespace seqmix::ops
