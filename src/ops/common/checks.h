#pragma once
// Argument checks shared by the ops: each failure names the argument and the expected shape.
#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

namespace seqmix::ops {

// Throws c10::Error "op: argument name must have shape [labels] (got [sizes])" unless t has dims dims.
void check_rank(const at::Tensor& t, const char* op, const char* name, int64_t dims, const char* labels);
// Throws unless a.size(dim_a) == b.size(dim_b).
void check_same_size(const at::Tensor& a, int64_t dim_a, const at::Tensor& b, int64_t dim_b,
                     const char* op, const char* what);
// Throws unless every tensor is floating point with the dtype of the first.
void check_same_float_dtype(const char* op, std::initializer_list<at::Tensor> tensors);
// The fused kernels' inputs: float32 or float64 CPU tensors (undefined tensors are skipped).
void check_kernel_inputs(const char* op, std::initializer_list<at::Tensor> tensors);
// Throws unless key_mask is undefined or bool [batch, keys] (true = a real key).
void check_key_mask(const char* op, const at::Tensor& key_mask, int64_t batch, int64_t keys);
// Throws unless the score scale is finite (a NaN or infinite scale silently poisons every output).
void check_scale(const char* op, double scale);
// Throws unless eps >= 0 (a negative floor lets a zero or negative normaliser through the division).
void check_eps(const char* op, double eps);
// Throws unless every entry of t is > 0 (a NaN is not): a documented range, e.g. FEM's inverse temperature beta.
// Skipped where the values cannot be read: Meta tensors and the fake tensors torch.compile traces with.
void check_positive(const char* op, const char* name, const at::Tensor& t);
// A decode step's state must have the dtype of its inputs (ATen would silently promote the step to the wider
// one); the error names the state and the dtype to make it with.
void check_state_dtype(const char* op, const at::Tensor& input, std::initializer_list<at::Tensor> state);
// A decode state's constructor arguments: every named size >= 0 and a floating-point dtype.
void check_state_args(const char* op, std::initializer_list<std::pair<const char*, int64_t>> sizes,
                      const at::TensorOptions& options);

// Per-op layouts, shared by each op's naive and fused forms.
// Attention: q [B,T,H,dk], k [B,S,H,dk], v [B,S,H,dv]; the T queries are the last of the S keys.
void check_attention_args(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);
// Linear attention and GLA: q, k [B,T,H,dk], v [B,T,H,dv] (and log_decay [B,T,H] or [B,T,H,dk] when defined).
void check_linear_scan_args(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& log_decay = {});
// One decode step of a linear-attention-style scan: q_t, k_t [B,H,dk], v_t [B,H,dv], and the state
// kv [B,H,F,dv], k_sum [B,H,F] (F, the feature width, is checked by the op).
void check_scan_step_args(const char* op, const at::Tensor& q_t, const at::Tensor& k_t, const at::Tensor& v_t,
                          const at::Tensor& kv, const at::Tensor& k_sum);
// Linear attention and GLA keep the keys themselves as features: their state's F must be q_t's dk.
void check_state_features_are_keys(const char* op, const at::Tensor& q_t, const at::Tensor& kv);
// AFT: k, v [B,T,C] and, when defined, mask bool [B,T].
void check_aft_args(const char* op, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask);
// SSM scan: u, delta [B,T,C], A [C,N], b, c [B,T,N].
void check_ssm_args(const char* op, const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A,
                    const at::Tensor& b, const at::Tensor& c);

// HyperMLP read: q [B,T,Hq,dqk], k [B,S,Hq,dqk], v [B,S,H,dvo], Hq = H or 2H (glu), T <= S; each mixing
// side (s [B,T,Hm,r] with its diag [Hm,Lmax], U [Hm,Lmax,r], Vt [Hm,r,Lmax]) is checked when defined.
struct HyperMixing;
struct HyperReadOptions;
void check_hypermlp_args(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const at::Tensor& s1, const HyperMixing& mix1, const at::Tensor& s2,
                         const HyperMixing& mix2, const HyperReadOptions& options);

}  // namespace seqmix::ops
