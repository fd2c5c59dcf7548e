// The naive twin of the second-order reads: each query's weighted covariance Cov_p [d,d] formed explicitly and
// applied to its vector, as the energy paper writes it (§3.2, App. A.3).
#include "seqmix/ops/second_order.h"
#include "weights.h"

namespace seqmix::ops {

using second_order::check_second_order;
using second_order::distance_probabilities;
using second_order::per_head;
using second_order::probabilities;

at::Tensor mha2nd1st_read_covariance(const at::Tensor& q, const at::Tensor& k, const at::Tensor& temperature,
                                     const at::Tensor& bias_scale, bool causal) {
  check_second_order("mha2nd1st_read_covariance", q, k, k, {{"temperature", temperature}, {"bias_scale", bias_scale}});
  check_positive("mha2nd1st_read_covariance", "temperature", temperature);
  auto qh = q.transpose(1, 2), kh = k.transpose(1, 2);
  auto p = distance_probabilities(qh, kh, temperature, causal);
  auto kbar = at::matmul(p, kh);
  auto second_moment = at::einsum("bhts,bhsd,bhse->bhtde", {p, kh, kh});
  auto covariance = second_moment - kbar.unsqueeze(-1) * kbar.unsqueeze(-2);  // [B,H,T,d,d]
  auto u = qh - kbar;
  auto b = at::matmul(covariance, u.unsqueeze(-1)).squeeze(-1);
  return (u + per_head(bias_scale) * b).transpose(1, 2);
}

at::Tensor light2nd1st_read_covariance(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                       const at::Tensor& tau, bool causal) {
  check_second_order("light2nd1st_read_covariance", q, k, v, {{"tau", tau}});
  check_scale("light2nd1st_read_covariance", scale);
  auto qh = q.transpose(1, 2), kh = k.transpose(1, 2), vh = v.transpose(1, 2);
  auto p = probabilities(at::matmul(qh, kh.transpose(-1, -2)) * scale, causal);
  auto vbar = at::matmul(p, vh);
  auto covariance = at::einsum("bhts,bhsd,bhse->bhtde", {p, vh, vh}) - vbar.unsqueeze(-1) * vbar.unsqueeze(-2);
  auto b = at::matmul(covariance, vbar.unsqueeze(-1)).squeeze(-1);
  return (vbar + per_head(tau) * b).transpose(1, 2);
}

}  // namespace seqmix::ops
