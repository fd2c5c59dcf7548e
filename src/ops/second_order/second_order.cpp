// MHA2nd1st and LightMHA2nd1st reads: softmax weights over the visible keys, then the weighted mean and the
// weighted covariance applied to a vector, in the O(N d) form and in the explicit covariance form.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "seqmix/ops/attention.h"
#include "seqmix/ops/second_order_attention.h"

namespace seqmix::ops {
namespace {

// logits [B,H,T,S] -> softmax over the visible keys.
at::Tensor probabilities(const at::Tensor& logits, bool causal) {
  const auto visible = visible_keys(logits.size(2), logits.size(3), causal, {}, logits.device());
  auto masked = visible.defined() ? logits.masked_fill(visible.logical_not(), -std::numeric_limits<double>::infinity())
                                  : logits;
  return at::softmax(masked, -1);
}

at::Tensor per_head(const at::Tensor& t) { return t.view({1, -1, 1, 1}); }  // [H] -> [1,H,1,1]

// MHA2nd1st's weights p [B,H,T,S] from q [B,H,T,d], k [B,H,S,d].
at::Tensor distance_probabilities(const at::Tensor& q, const at::Tensor& k, const at::Tensor& temperature, bool causal) {
  auto logits = at::matmul(q, k.transpose(-1, -2)) - 0.5 * k.square().sum(-1).unsqueeze(-2);
  return probabilities(logits / per_head(temperature), causal);
}

// The per-head parameters are (name, tensor) pairs, each required [H].
void check_second_order(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        std::initializer_list<std::pair<const char*, at::Tensor>> per_head_parameters) {
  check_attention_args(op, q, k, v);
  for (const auto& parameter : per_head_parameters) {
    const at::Tensor& t = parameter.second;
    check_rank(t, op, parameter.first, 1, "H");
    TORCH_CHECK(t.size(0) == q.size(2), op, ": per-head parameters must have ", q.size(2), " entries (got ",
                t.size(0), " in ", parameter.first, ")");
  }
}

}  // namespace

at::Tensor mha2nd1st_read(const at::Tensor& q, const at::Tensor& k, const at::Tensor& temperature,
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

at::Tensor light2nd1st_read(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
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
