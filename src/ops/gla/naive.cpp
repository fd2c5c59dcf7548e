// Ground-truth gated linear attention: the decayed score matrix [B,H,T,T] (per head), or the per-key decays
// [B,H,T,T,dk] summed over the key features (per key), plain ATen.
#include <ATen/ATen.h>

#include <limits>

#include "../common/checks.h"
#include "../common/packing.h"
#include "seqmix/ops/attention.h"
#include "seqmix/ops/gla.h"

namespace seqmix::ops {

PriorRead gla_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& log_decay, const at::Tensor& cu_seqlens) {
  const char* op = "gla_naive";
  // Required here; the shared check skips an undefined one.
  TORCH_CHECK(log_decay.defined(), op, ": log_decay is required ([B,T,H] or [B,T,H,dk])");
  check_linear_scan_args(op, q, k, v, log_decay);
  check_cu_seqlens(op, cu_seqlens, q.size(0), q.size(1));
  const int64_t T = q.size(1);
  const bool per_key = log_decay.dim() == 4;
  // c [B,H,T] or [B,H,T,dk]: the log decay from the start to each position.
  auto c = log_decay.cumsum(1).transpose(1, 2);
  // [T,T]: causal, and packed within each sequence only (exp(c_t - c_i) then spans one sequence's decays).
  auto visible = cu_seqlens.defined() ? visible_keys(T, T, true, {}, q.device(), cu_seqlens).view({T, T})
                                      : causal_key_mask(T, T, q.device());
  // exponent[.., t, i (, f)] = c_t - c_i. Masked before exp so invisible pairs (c_t - c_i > 0) never overflow.
  auto exponent = c.unsqueeze(3) - c.unsqueeze(2);
  auto hidden = visible.logical_not();
  if (per_key) hidden = hidden.unsqueeze(-1);
  auto decay = exponent.masked_fill(hidden, -std::numeric_limits<double>::infinity()).exp();
  at::Tensor scores;  // [B,H,T,T]: the weight of key i at query t
  if (per_key) {
    // sum_f q_tf k_if e^{c_tf - c_if}
    scores = (q.transpose(1, 2).unsqueeze(3) * k.transpose(1, 2).unsqueeze(2) * decay).sum(-1);
  } else {
    scores = at::matmul(q.transpose(1, 2), k.permute({0, 2, 3, 1})) * decay;
  }
  PriorRead read;
  read.numerator = at::matmul(scores, v.transpose(1, 2)).transpose(1, 2);
  read.normaliser = scores.sum(-1).transpose(1, 2);
  return read;
}

}  // namespace seqmix::ops
