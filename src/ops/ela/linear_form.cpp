// ela_fused: the linear form of every kernel. Causal Hadamard Exp goes to the fused scan; bidirectional
// Hadamard Exp contracts shifted features once; the polynomial kernels run linear attention's chunked
// scan on their feature maps.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "../common/internal.h"
#include "fused_kernels.h"
#include "seqmix/ops/ela.h"
#include "seqmix/ops/linear_attention.h"

namespace seqmix::ops {
namespace {

// Bidirectional Hadamard Exp features, shifted so every exponent is <= 0: a per-channel key shift m_d
// shared by all keys (the max over the sequence; exact because the query side carries +m_d) and a
// per-query shift c_t (cancels in the row normalisation). y does not depend on the shifts, so they are
// constants for autograd.
std::pair<at::Tensor, at::Tensor> shifted_exp_features(const at::Tensor& q, const at::Tensor& k) {
  at::Tensor m, c;
  {
    at::NoGradGuard no_grad;
    m = std::get<0>(k.detach().max(1, true));                // [B,1,H,dk]
    c = std::get<0>((q.detach() + m).max(-1, true));         // [B,T,H,1]
  }
  return {at::exp(q + m - c), at::exp(k - m)};
}

}  // namespace

at::Tensor ela_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const ExactKernel& kernel,
                     bool causal, double eps) {
  check_linear_scan_args("ela_fused", q, k, v);
  check_eps("ela_fused", eps);
  if (kernel.exponential) {
    if (causal) return hadamard_scan(q, k, v);
    auto features = shifted_exp_features(q, k);
    const PriorRead read = linear_attention_fused(features.first, features.second, v, false);
    return normalised_read_op(NormalisedReadCall{read.numerator, read.normaliser, eps});
  }
  auto read = linear_attention_fused(kernel.query_features(q), kernel.key_features(k), v, causal);
  check_row_sums(kernel, read.normaliser);
  return normalised_read_op(NormalisedReadCall{read.numerator, read.normaliser, eps});
}

}  // namespace seqmix::ops
