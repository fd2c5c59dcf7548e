// Linear attention in ATen matrix products (include/seqmix/ops/linear_attention.h): the causal scan is GLA's chunked
// form with zero decay; the bidirectional read is q (K^T V) over each sequence.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "../common/packing.h"
#include "seqmix/ops/gla.h"
#include "seqmix/ops/linear_attention.h"

namespace seqmix::ops {

PriorRead linear_attention_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                   const at::Tensor& cu_seqlens) {
  const char* op = "linear_attention_chunked";
  check_linear_scan_args(op, q, k, v);
  check_cu_seqlens(op, cu_seqlens, q.size(0), q.size(1));
  if (causal) return gla_chunked(q, k, v, at::zeros({q.size(0), q.size(1), q.size(2)}, q.options()), cu_seqlens);
  // q [B,T,H,dk], k [B,T,H,dk], v [B,T,H,dv]: the whole sequence's K^T V [B,H,dk,dv] and sum k [B,H,dk].
  const auto whole = [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    const auto kv = at::einsum("bthf,bthd->bhfd", {k, v});
    return std::vector<at::Tensor>{at::einsum("bthf,bhfd->bthd", {q, kv}), at::einsum("bthf,bhf->bth", {q, k.sum(1)})};
  };
  if (!cu_seqlens.defined()) {
    const auto r = whole(q, k, v);
    return {r[0], r[1]};
  }
  const auto joined = each_sequence_alone(op, cu_seqlens, q.size(1), {1, 1}, [&](int64_t begin, int64_t length, int64_t) {
    const auto part = [&](const at::Tensor& x) { return x.narrow(1, begin, length); };
    return whole(part(q), part(k), part(v));
  });
  return {joined[0], joined[1]};
}

}  // namespace seqmix::ops
