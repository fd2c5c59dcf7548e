// Ground-truth gated linear attention: the [B,H,T,T] decayed score matrix, plain ATen.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "seqmix/ops/attention.h"
#include "seqmix/ops/gla.h"

namespace seqmix::ops {

PriorRead gla_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& log_decay) {
  const char* op = "gla_naive";
  check_rank(log_decay, op, "log_decay", 3, "B,T,H");  // required here; the shared check skips an undefined one
  check_linear_scan_args(op, q, k, v, log_decay);
  const int64_t T = q.size(1);
  auto c = log_decay.cumsum(1).transpose(1, 2);            // [B,H,T]
  auto visible = causal_key_mask(T, T, q.device());         // [T,T]
  // Mask the exponent before exp so invisible pairs (c_t - c_i > 0) never overflow.
  auto exponent = (c.unsqueeze(-1) - c.unsqueeze(-2)).masked_fill(visible.logical_not(),
                                                                   -std::numeric_limits<double>::infinity());
  auto decay = exponent.exp();                              // [B,H,T,T], exp(c_t - c_i) for i <= t
  auto scores = at::matmul(q.transpose(1, 2), k.permute({0, 2, 3, 1})) * decay;
  PriorRead read;
  read.numerator = at::matmul(scores, v.transpose(1, 2)).transpose(1, 2);
  read.normaliser = scores.sum(-1).transpose(1, 2);
  return read;
}

}  // namespace seqmix::ops
