// The delta rule's parallel form, plain ATen (derivation in README.md).
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "seqmix/ops/delta.h"

namespace seqmix::ops {
namespace {

void check_delta_rule_args(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& beta) {
  check_linear_scan_args(op, q, k, v);
  TORCH_CHECK(beta.defined(), op, ": beta must be given, [B,T,H]");
  check_rank(beta, op, "beta", 3, "B,T,H");
  check_same_float_dtype(op, {q, beta});
  TORCH_CHECK(beta.sizes() == q.sizes().slice(0, 3), op, ": beta must share [B,T,H] with q (got ", beta.sizes(),
              " and ", q.sizes(), ")");
}

}  // namespace

PriorRead delta_rule_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta) {
  check_delta_rule_args("delta_rule_naive", q, k, v, beta);
  const auto Q = q.transpose(1, 2), K = k.transpose(1, 2), V = v.transpose(1, 2);  // [B,H,T,d]
  const auto b = beta.transpose(1, 2).unsqueeze(-1);                                 // [B,H,T,1]
  // A = I + strictly_lower(diag(b) K K^T): row i of U solves u_i + b_i sum_{j<i} (k_i . k_j) u_j = b_i v_i.
  const auto A = (b * at::matmul(K, K.transpose(-1, -2))).tril(-1);
  const auto ones = at::ones_like(b);
  // The written values of v and of the ones column, in one solve: [B,H,T,dv+1].
  const auto U = at::linalg_solve_triangular(A + at::eye(A.size(-1), A.options()), b * at::cat({V, ones}, -1),
                                             /*upper=*/false, /*left=*/true, /*unitriangular=*/true);
  const auto read = at::matmul(at::matmul(Q, K.transpose(-1, -2)).tril(), U);  // [B,H,T,dv+1]
  const int64_t dv = v.size(-1);
  PriorRead r;
  r.numerator = read.narrow(-1, 0, dv).transpose(1, 2);          // [B,T,H,dv]
  r.normaliser = read.select(-1, dv).transpose(1, 2);            // [B,T,H]
  return r;
}

}  // namespace seqmix::ops
