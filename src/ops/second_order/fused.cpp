// The fused form of the MHA2nd1st and LightMHA2nd1st reads: the weighted covariance applied to a vector without
// forming it, O(N d) per query (README.md derives it); ATen matrix products, so it runs on every device.
#include "seqmix/ops/second_order.h"
#include "weights.h"

namespace seqmix::ops {

using second_order::check_second_order;
using second_order::distance_probabilities;
using second_order::per_head;
using second_order::probabilities;

at::Tensor mha2nd1st_read_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& temperature,
                                const at::Tensor& bias_scale, bool causal) {
  check_second_order("mha2nd1st_read", q, k, k, {{"temperature", temperature}, {"bias_scale", bias_scale}});
  auto qh = q.transpose(1, 2), kh = k.transpose(1, 2);  // [B,H,T,d], [B,H,S,d]
  check_positive("mha2nd1st_read", "temperature", temperature);
  auto p = distance_probabilities(qh, kh, temperature, causal);
  auto kbar = at::matmul(p, kh);
  auto u = qh - kbar;
  auto weighted = p * at::matmul(u, kh.transpose(-1, -2));  // p_j (k_j . u)
  auto b = at::matmul(weighted, kh) - kbar * (kbar * u).sum(-1, true);
  return (u + per_head(bias_scale) * b).transpose(1, 2);
}

at::Tensor light2nd1st_read_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                  const at::Tensor& tau, bool causal) {
  check_second_order("light2nd1st_read", q, k, v, {{"tau", tau}});
  check_scale("light2nd1st_read", scale);
  auto qh = q.transpose(1, 2), kh = k.transpose(1, 2), vh = v.transpose(1, 2);
  auto p = probabilities(at::matmul(qh, kh.transpose(-1, -2)) * scale, causal);
  auto vbar = at::matmul(p, vh);
  auto weighted = p * at::matmul(vbar, vh.transpose(-1, -2));  // p_j (v_j . vbar)
  auto b = at::matmul(weighted, vh) - vbar * vbar.square().sum(-1, true);
  return (vbar + per_head(tau) * b).transpose(1, 2);
}

}  // namespace seqmix::ops
