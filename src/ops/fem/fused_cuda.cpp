// The fused FEM softmax read on CUDA tensors: the checks, the bfloat16 operands, the elementwise prologue and
// epilogue of the backward in ATen (float32), and the kernels of fused_cuda.cu launched on torch's current stream.
// This file is the CUDA kernel of the kernel operators seqmix::_fem_softmax_forward/_backward (defined with their CPU
// and Meta kernels in autograd.cpp) and registers itself with the dispatcher at its end; the build compiles it with
// the .cu files (SEQMIX_CUDA with a CUDA torch), so a build without them has no CUDA kernel for the operators and
// the op's impl list on CUDA says so (ImplSet, registered_on).
#include <ATen/ATen.h>
#include <torch/library.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <cstdint>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "../common/checks.h"
#include "fused_cuda.h"
#include "fused_kernels.h"

namespace seqmix::ops {
namespace {

constexpr const char* kOp = "fem_softmax_read (impl fused on CUDA)";

void check_cuda_read(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                     double cap, double scale, const at::Tensor& key_mask) {
  check_attention_args(kOp, q, k, v);
  check_key_mask(kOp, key_mask, k.size(0), k.size(1));
  check_scale(kOp, scale);
  TORCH_CHECK(q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf, kOp,
              ": the kernel reads bfloat16 or float16 tensors (got ", q.scalar_type(),
              "); impl='torch' or 'naive' read float32 and float64 on a GPU");
  const int64_t H = q.size(2), dk = q.size(3), dv = v.size(3);
  TORCH_CHECK(fem_cuda::supports_head_dims(dk, dv), kOp,
              ": the kernel is compiled for head widths (dk, dv) in (32,32), (64,64), (128,128), (32,64), (64,32), "
              "(64,128), (128,64) (got dk=", dk, ", dv=", dv, "); impl='torch' reads any");
  const int64_t needed = std::max(fem_cuda::forward_shared_bytes(dk, dv), fem_cuda::backward_shared_bytes(dk, dv));
  const int64_t granted = fem_cuda::device_shared_bytes_limit();
  TORCH_CHECK(needed <= granted, kOp, ": at dk=", dk, ", dv=", dv, " the kernel needs ", needed / 1024,
              " KiB of shared memory per block and this GPU grants ", granted / 1024, " KiB; impl='torch' reads it");
  TORCH_CHECK(beta.numel() == H * dv, kOp, ": beta must have H*dv = ", H * dv, " entries (got ", beta.numel(), ")");
  check_positive(kOp, "beta", beta);
  // bfloat16 has float32's exponent range, so the bounds of the float32 CPU kernel hold (README.md).
  TORCH_CHECK(cap > 0 && cap <= kFemShiftSpan, kOp, ": needs a value cap in (0, ", kFemShiftSpan, "] (got ", cap,
              ")");
}

void* current_stream(const at::Device& device) {
  return c10::impl::VirtualGuardImpl(device.type()).getStream(device).native_handle();
}

const uint16_t* bf16_data(const at::Tensor& t) { return reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>()); }

// t in bfloat16, contiguous and 16-byte aligned (the kernels load 8 elements at once; a view's offset may break it).
at::Tensor bf16_operand(const at::Tensor& t) {
  auto out = t.to(at::kBFloat16).contiguous();
  return reinterpret_cast<uintptr_t>(out.data_ptr()) % 16 == 0 ? out : out.clone();
}

// The key mask and, per batch row, its first real key (S when it has none), on the device.
fem_cuda::Visibility visibility(bool causal, const at::Tensor& key_mask, at::Tensor& first_real, int64_t S) {
  fem_cuda::Visibility vis;
  vis.causal = causal;
  if (!key_mask.defined()) return vis;
  const auto mask_int = key_mask.to(at::kInt);
  const auto none = at::full({key_mask.size(0)}, S, key_mask.options().dtype(at::kLong));
  first_real = S == 0 ? none : at::where(key_mask.any(1), mask_int.argmax(1), none).contiguous();
  vis.key_mask = key_mask.data_ptr<bool>();
  vis.first_real = first_real.data_ptr<int64_t>();
  return vis;
}

FemReadForward cuda_forward(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                                             const at::Tensor& beta_in, double cap, bool causal, double scale,
                                             const at::Tensor& key_mask_in) {
  check_cuda_read(q_in, k_in, v_in, beta_in, cap, scale, key_mask_in);
  const c10::DeviceGuard guard(q_in.device());
  const auto q = bf16_operand(q_in), k = bf16_operand(k_in), v = bf16_operand(v_in);
  const auto beta = beta_in.to(at::kFloat).contiguous();
  const auto key_mask = key_mask_in.defined() ? key_mask_in.contiguous() : at::Tensor();
  const int64_t B = q.size(0), T = q.size(1), S = k.size(1), H = q.size(2), dk = q.size(3), dv = v.size(3);
  const auto options = q.options().dtype(at::kFloat);
  FemReadForward r{at::empty({B, T, H, dv}, options), at::empty({B, T, H, dv}, options), at::empty({B, H, T}, options)};
  at::Tensor first_real;
  fem_cuda::ForwardArgs a;
  a.q = bf16_data(q);
  a.k = bf16_data(k);
  a.v = bf16_data(v);
  a.beta = beta.data_ptr<float>();
  a.visibility = visibility(causal, key_mask, first_real, S);
  a.mean = r.mean.data_ptr<float>();
  a.free_energy = r.free_energy.data_ptr<float>();
  a.lse = r.lse.data_ptr<float>();
  a.B = B, a.T = T, a.S = S, a.H = H;
  a.scale = static_cast<float>(scale);
  a.cap = static_cast<float>(cap);
  a.shift_floor = static_cast<float>(cap - kFemShiftSpan);
  const std::string error = fem_cuda::launch_forward(a, dk, dv, current_stream(q.device()));
  TORCH_CHECK(error.empty(), kOp, ": the forward kernel did not launch: ", error);
  return r;
}

std::vector<at::Tensor> cuda_backward(const at::Tensor& d_mean_in, const at::Tensor& d_free_in,
                                                       const at::Tensor& q_in, const at::Tensor& k_in,
                                                       const at::Tensor& v_in, const at::Tensor& beta_in,
                                                       const FemReadForward& saved, double cap, bool causal,
                                                       double scale, const at::Tensor& key_mask_in) {
  const c10::DeviceGuard guard(q_in.device());
  const int64_t B = q_in.size(0), T = q_in.size(1), S = k_in.size(1), H = q_in.size(2), dk = q_in.size(3),
                dv = v_in.size(3);
  // The prologue in float32 (README.md, "Backward"): c, u, L = beta F, dL = dF / beta, G = dL exp(cap - L) and
  // Delta = dmu . mu + sum_j dL_j per row.
  const auto beta = beta_in.to(at::kFloat).reshape({H, dv});
  const auto v = v_in.to(at::kFloat), limit = cap / beta;
  const auto clipped = at::where(v > limit, limit, at::where(v < -limit, -limit, v));
  const auto exp_cap = at::exp(beta * clipped - cap);
  const auto mean = saved.mean.to(at::kFloat), free_energy = saved.free_energy.to(at::kFloat);
  const auto d_mean = d_mean_in.defined() ? d_mean_in.to(at::kFloat) : at::zeros_like(mean);
  const auto d_free = d_free_in.defined() ? d_free_in.to(at::kFloat) : at::zeros_like(free_energy);
  const auto log_read = beta * free_energy, d_log = d_free / beta;
  // cap - L <= 2 cap wherever a row sees a key (|L| <= cap); a row that sees none has P = 0, and the clamp keeps
  // its G finite.
  const auto g_exp = d_log * at::exp(at::clamp_max(cap - log_read, 2 * cap));
  const auto delta = ((d_mean * mean).sum(-1) + d_log.sum(-1)).permute({0, 2, 1}).contiguous();  // [B,H,T]
  const auto q = bf16_operand(q_in), k = bf16_operand(k_in), c16 = bf16_operand(clipped),
             e16 = bf16_operand(exp_cap), gm16 = bf16_operand(d_mean), ge16 = bf16_operand(g_exp);
  const auto lse = saved.lse.to(at::kFloat).contiguous();
  const auto key_mask = key_mask_in.defined() ? key_mask_in.contiguous() : at::Tensor();
  const auto options = q.options().dtype(at::kFloat);
  auto dq = at::zeros({B, T, H, dk}, options), dk_out = at::empty({B, S, H, dk}, options);
  auto dc = at::empty({B, S, H, dv}, options), du_raw = at::empty({B, S, H, dv}, options);
  at::Tensor first_real;
  fem_cuda::BackwardArgs a;
  a.q = bf16_data(q);
  a.k = bf16_data(k);
  a.clipped = bf16_data(c16);
  a.exp_cap = bf16_data(e16);
  a.g_mean = bf16_data(gm16);
  a.g_exp = bf16_data(ge16);
  a.lse = lse.data_ptr<float>();
  a.delta = delta.data_ptr<float>();
  a.visibility = visibility(causal, key_mask, first_real, S);
  a.dq = dq.data_ptr<float>();
  a.dk = dk_out.data_ptr<float>();
  a.dc = dc.data_ptr<float>();
  a.du_raw = du_raw.data_ptr<float>();
  a.B = B, a.T = T, a.S = S, a.H = H;
  a.scale = static_cast<float>(scale);
  const std::string error = fem_cuda::launch_backward(a, dk, dv, current_stream(q.device()));
  TORCH_CHECK(error.empty(), kOp, ": the backward kernel did not launch: ", error);
  // The epilogue: du = exp(u - cap) du_raw, then the clamp and scale in reverse as fused.cpp's
  // clip_and_scale_backward (an entry on the limit splits its gradient 50/50, as at::minimum/maximum do).
  const auto du = exp_cap * du_raw;
  const auto d_clipped = dc + beta * du;
  const auto share = ((v > limit) | (v < -limit)).to(at::kFloat) + 0.5 * ((v == limit) | (v == -limit)).to(at::kFloat);
  const auto sign = 2.0 * (v >= limit).to(at::kFloat) - 1.0;
  const auto d_v = (1.0 - share) * d_clipped;
  const auto dbeta_terms = clipped * du + share * d_clipped * sign * (-cap / (beta * beta));
  const std::vector<int64_t> batch_and_time{0, 1};
  const auto dbeta = dbeta_terms.sum(batch_and_time) - (d_free * free_energy / beta).sum(batch_and_time);
  return {dq.to(q_in.scalar_type()), dk_out.to(k_in.scalar_type()), d_v.to(v_in.scalar_type()),
          dbeta.reshape(beta_in.sizes()).to(beta_in.scalar_type())};
}

using Tensors = std::vector<at::Tensor>;
using Mask = c10::optional<at::Tensor>;

// The kernel operators' CUDA kernels: {mean, free_energy, lse} (float32) and {dq, dk, dv, dbeta}.
Tensors forward_kernel(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                       double cap, bool causal, double scale, const Mask& key_mask) {
  auto r = cuda_forward(q, k, v, beta, cap, causal, scale, key_mask.has_value() ? *key_mask : at::Tensor());
  return {r.mean, r.free_energy, r.lse};
}
Tensors backward_kernel(const at::Tensor& d_mean, const at::Tensor& d_free, const at::Tensor& q, const at::Tensor& k,
                        const at::Tensor& v, const at::Tensor& beta, const at::Tensor& mean,
                        const at::Tensor& free_energy, const at::Tensor& lse, double cap, bool causal, double scale,
                        const Mask& key_mask) {
  return cuda_backward(d_mean, d_free, q, k, v, beta, {mean, free_energy, lse}, cap, causal, scale,
                       key_mask.has_value() ? *key_mask : at::Tensor());
}

}  // namespace
}  // namespace seqmix::ops

TORCH_LIBRARY_IMPL(seqmix, CUDA, m) {
  m.impl("_fem_softmax_forward", TORCH_FN(seqmix::ops::forward_kernel));
  m.impl("_fem_softmax_backward", TORCH_FN(seqmix::ops::backward_kernel));
}
