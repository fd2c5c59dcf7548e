// The quadratic form of ELA: the explicit kernel matrix, its row-normalised weights and the read.
// Readable and O(T^2) in memory; the naive twin of ela_fused.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "seqmix/ops/ela.h"

namespace seqmix::ops {

at::Tensor ela_kernel_matrix(const at::Tensor& q, const at::Tensor& k, const ExactKernel& kernel) {
  const char* op = "ela_kernel_matrix";
  check_rank(q, op, "q", 4, "B,T,H,dk");
  check_rank(k, op, "k", 4, "B,S,H,dk");
  check_same_float_dtype(op, {q, k});
  TORCH_CHECK(q.size(0) == k.size(0) && q.size(2) == k.size(2) && q.size(3) == k.size(3), op,
              ": q and k must share B, H and dk (got ", q.sizes(), " and ", k.sizes(), ")");
  if (kernel.exponential) {
    // log k_tj = logsumexp_d (q_td + k_jd), over a [B,H,T,S,dk] tensor.
    auto qh = q.permute({0, 2, 1, 3}).unsqueeze(3);  // [B,H,T,1,dk]
    auto kh = k.permute({0, 2, 1, 3}).unsqueeze(2);  // [B,H,1,S,dk]
    return at::logsumexp(qh + kh, -1);
  }
  return at::einsum("bthf,bshf->bhts", {kernel.query_features(q), kernel.key_features(k)});
}

at::Tensor ela_attention_weights(const at::Tensor& q, const at::Tensor& k, const ExactKernel& kernel, bool causal,
                                 double eps) {
  const char* op = "ela_attention_weights";
  check_rank(q, op, "q", 4, "B,T,H,dk");
  check_rank(k, op, "k", 4, "B,T,H,dk");
  check_same_float_dtype(op, {q, k});
  check_eps(op, eps);
  TORCH_CHECK(q.sizes() == k.sizes(), op, ": q and k must have the same shape (got ", q.sizes(), " and ",
              k.sizes(), ")");
  auto matrix = ela_kernel_matrix(q, k, kernel);  // [B,H,T,T]
  const int64_t T = q.size(1);
  auto future = at::ones({T, T}, q.options().dtype(at::kBool)).triu(1);
  if (kernel.exponential) {
    if (causal) matrix = matrix.masked_fill(future, -std::numeric_limits<double>::infinity());
    return at::softmax(matrix, -1);  // exp(log k) / sum exp(log k), stably
  }
  if (causal) matrix = matrix.masked_fill(future, 0.0);
  auto row_sum = matrix.sum(-1, true);
  check_row_sums(kernel, row_sum);
  return matrix / row_sum.clamp_min(eps);
}

at::Tensor ela_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const ExactKernel& kernel,
                     bool causal, double eps) {
  check_linear_scan_args("ela_naive", q, k, v);
  check_eps("ela_naive", eps);
  auto weights = ela_attention_weights(q, k, kernel, causal, eps);  // [B,H,T,T]
  return at::einsum("bhts,bshe->bthe", {weights, v});
}

}  // namespace seqmix::ops
