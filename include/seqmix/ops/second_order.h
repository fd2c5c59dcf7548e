#pragma once
// The reads of the energy paper's Newton-inspired attentions (§3.2, App. A.3), per head, on [B,T,H,d]
// tensors whose T queries are the last T of the S key positions (causal: query t sees keys j <= t + S - T).
//
// MHA2nd1st: p_j = softmax_j(-(||q - k_j||^2) / (2 T_h)) = softmax_j((q.k_j - ||k_j||^2 / 2) / T_h),
//   kbar = sum_j p_j k_j, u = q - kbar, b = c_h Cov_p(k) u = c_h [sum_j p_j k_j (k_j.u) - kbar (kbar.u)];
//   returns u + b. (The layer applies W_V M_h and W_O; the values of the attended tokens are never read.)
// LightMHA2nd1st: p_j = softmax_j(scale q.k_j), vbar = sum_j p_j v_j, b = Cov_p(v) vbar
//   = sum_j p_j v_j (v_j.vbar) - vbar ||vbar||^2; returns vbar + tau_h b.
#include <ATen/core/Tensor.h>

#include "seqmix/ops/impl.h"
#include "seqmix/ops/operators.h"

namespace seqmix::ops {

// q [B,T,H,d], k [B,S,H,d], temperature [H] (T_h > 0), bias_scale [H] (c_h) -> [B,T,H,d].
// O(N d) form: b = c ((P * (u K^T)) K - kbar (kbar.u)), no d x d matrix.
at::Tensor mha2nd1st_read_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& temperature,
                                const at::Tensor& bias_scale, bool causal);
// The same with each query's covariance matrix Cov_p(k) [d,d] formed explicitly (the tests' reference).
at::Tensor mha2nd1st_read_covariance(const at::Tensor& q, const at::Tensor& k, const at::Tensor& temperature,
                                     const at::Tensor& bias_scale, bool causal);

// q, k [B,S..,H,dk], v [B,S,H,dv], tau [H] -> [B,T,H,dv]; O(N d) form b = (P * (vbar V^T)) V - vbar ||vbar||^2.
at::Tensor light2nd1st_read_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                  const at::Tensor& tau, bool causal);
// With Cov_p(v) [dv,dv] formed explicitly.
at::Tensor light2nd1st_read_covariance(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                       const at::Tensor& tau, bool causal);

// The implementations of torch.ops.seqmix.mha2nd1st_read and light2nd1st_read, whose C++ entry points (operators.h)
// are generated from their schemas: fused is the O(N d) form, naive the one with the covariance formed explicitly.
// Both are ATen code, so both run on a GPU too.
constexpr ImplSet kSecondOrderImpls{Impl::fused, Impl::naive};  // the fused reads are ATen code

}  // namespace seqmix::ops
