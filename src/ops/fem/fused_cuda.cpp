// The fused FEM softmax read on CUDA tensors: the Triton kernels of fem_softmax_read_triton.py, compiled ahead of
// time for the build's GPU architectures (scripts/triton_aot.py) and launched on torch's current stream through the
// CUDA driver (../common/triton_launch.h), with the backward's elementwise prologue in ATen (float32). This file is
// the CUDA kernel of the kernel operators seqmix::_fem_softmax_forward/_backward (defined with their CPU and Meta
// kernels in autograd.cpp) and registers itself with the dispatcher at its end; the build compiles it when torch
// has CUDA (SEQMIX_CUDA). The grids and block sizes are the compiled entries' own (launch_configs() in the Python
// file); the argument lists are checked against each kernel's signature at every launch.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/library.h>

#include <cstdint>

#include "../common/checks.h"
#include "../common/gpu_kernels.h"
#include "../common/torch_op.h"
#include "../common/triton_launch.h"
#include "seqmix/ops/impl.h"
#include "fused_kernels.h"
#include "triton_kernels.h"

namespace seqmix::ops {
namespace {

constexpr const char* kOp = "fem_softmax_read (impl fused on CUDA, the Triton kernels)";
using gpu_kernels::current_stream;
using gpu_kernels::arg;
using gpu_kernels::kMaxHeadWidth;
using gpu_kernels::kMaxPrograms;

int64_t head_block(int64_t d) { return d <= 64 ? 64 : 128; }

void check_read(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta, double cap,
                double scale, const at::Tensor& key_mask) {
  check_attention_args(kOp, q, k, v);
  check_key_mask(kOp, key_mask, k.size(0), k.size(1));
  check_scale(kOp, scale);
  const auto dtype = q.scalar_type();
  TORCH_CHECK(gpu_kernels::reads_dtype(dtype), kOp,
              ": the kernels read float32, float16 or bfloat16 (got ", dtype,
              "); impl='naive' or 'torch' read float64 on a GPU");
  const int64_t T = q.size(1), S = k.size(1), H = q.size(2), dk = q.size(3), dv = v.size(3);
  for (const auto& [name, width] : {std::pair<const char*, int64_t>{"dk", dk}, {"dv", dv}}) {
    TORCH_CHECK(gpu_kernels::reads_width(width), kOp, ": the head width ", name,
                " must be a multiple of 16 from 16 to ", kMaxHeadWidth, " (got ", width, "); impl='torch' reads any");
  }
  TORCH_CHECK(T <= S, kOp, ": needs at most as many queries as keys (got T = ", T, ", S = ", S, ")");
  TORCH_CHECK(q.size(0) * S <= gpu_kernels::kMaxRows, kOp, ": B*S = ", q.size(0) * S,
              " positions exceed the kernels' int32 rows; split the batch");
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor*>{"beta", &beta}, {"key_mask", &key_mask}}) {
    TORCH_CHECK(!t->defined() || t->device() == q.device(), kOp, ": ", name, " must be on q's device ", q.device(),
                " (got ", t->device(), ")");
  }
  TORCH_CHECK(q.size(0) * H <= kMaxPrograms, kOp, ": B*H = ", q.size(0) * H, " exceeds the kernels' grid (",
              kMaxPrograms, "); split the batch");
  TORCH_CHECK(beta.numel() == H * dv, kOp, ": beta must have H*dv = ", H * dv, " entries (got ", beta.numel(), ")");
  check_positive(kOp, "beta", beta);
  TORCH_CHECK(cap > 0 && cap <= kFemShiftSpan, kOp, ": needs a value cap in (0, ", kFemShiftSpan, "] (got ", cap,
              ")");
}

// The inputs as the kernels read them (the Python file's layout conventions): contiguous, one dtype, beta [H*dv];
// the sequences of the batch rows as cu_q = T * arange(B+1), cu_k = S * arange(B+1); the key mask's bytes and each
// batch row's first real key (S when it has none), or one-element placeholders the kernels do not read.
struct ReadInputs {
  at::Tensor q, k, v, beta, mask, first_real, cu_q, cu_k;
  int64_t B, T, S, H, dk, dv;
  bool has_mask;
};

ReadInputs read_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                       const at::Tensor& key_mask) {
  ReadInputs r;
  using gpu_kernels::kernel_operand;
  r.q = kernel_operand(q), r.k = kernel_operand(k), r.v = kernel_operand(v);
  r.beta = kernel_operand(beta.to(q.scalar_type()).reshape({-1}));
  r.B = q.size(0), r.T = q.size(1), r.S = k.size(1), r.H = q.size(2), r.dk = q.size(3), r.dv = v.size(3);
  const auto longs = q.options().dtype(at::kLong);
  r.cu_q = at::arange(r.B + 1, longs) * r.T;
  r.cu_k = at::arange(r.B + 1, longs) * r.S;
  r.has_mask = key_mask.defined();
  if (r.has_mask) {
    r.mask = key_mask.contiguous().view(at::kChar);
    const auto none = at::full({r.B}, r.S, longs);
    r.first_real = (r.S == 0 ? none : at::where(key_mask.any(1), key_mask.to(at::kChar).argmax(1), none))
                       .to(at::kInt)
                       .contiguous();
  } else {
    r.mask = at::ones({1}, q.options().dtype(at::kChar));
    r.first_real = at::zeros({1}, q.options().dtype(at::kInt));
  }
  return r;
}

// The compiled entry of `kernel` for these inputs on this GPU (its block sizes are launch_configs()'s).
const triton::KernelEntry& entry_for(const char* kernel, const ReadInputs& r) {
  const int arch = triton::arch_for_device(triton::kTritonKernels, r.q.device().index());
  return triton::find_kernel(triton::kTritonKernels, kernel, gpu_kernels::entry_dtype(r.q.scalar_type()), arch,
                             {{"BLOCK_DK", head_block(r.dk)},
                              {"BLOCK_DV", head_block(r.dv)},
                              {"EXACT", r.q.scalar_type() == at::kFloat}});
}

// One program per block of `block` rows (queries or keys, `rows` of them) per sequence and head.
triton::Grid grid_for(const triton::KernelEntry& entry, const char* block, int64_t rows, const ReadInputs& r) {
  const int64_t size = triton::constexpr_of(entry, block);
  return {static_cast<unsigned>((rows + size - 1) / size), static_cast<unsigned>(r.B * r.H), 1};
}

using Tensors = std::vector<at::Tensor>;

// {mean [B,T,H,dv], free_energy [B,T,H,dv], lse [B,H,T]}, float32.
Tensors forward_kernel(const FemSoftmaxForwardCall& call) {
  const at::Tensor key_mask = call.key_mask.value_or(at::Tensor());
  check_read(call.q, call.k, call.v, call.beta, call.cap, call.scale, key_mask);
  const c10::DeviceGuard guard(call.q.device());
  const ReadInputs r = read_inputs(call.q, call.k, call.v, call.beta, key_mask);
  const auto options = r.q.options().dtype(at::kFloat);
  auto mean = at::empty({r.B, r.T, r.H, r.dv}, options), free_energy = at::empty({r.B, r.T, r.H, r.dv}, options);
  auto lse = at::empty({r.B, r.T, r.H}, options);  // the kernel's layout; the operator's is [B,H,T]
  const char* el = gpu_kernels::element(r.q.scalar_type());
  const auto& entry = entry_for(triton::kFemSoftmaxReadFwdKernel, r);
  triton::launch(entry, r.q.device().index(), grid_for(entry, "BLOCK_M", r.T, r), current_stream(r.q.device()),
                 {arg(r.q, el), arg(r.k, el), arg(r.v, el), arg(r.beta, el), arg(r.mask, "i8"),
                  arg(r.first_real, "i32"), arg(r.cu_q, "i64"), arg(r.cu_k, "i64"), arg(mean, "fp32"),
                  arg(free_energy, "fp32"), arg(lse, "fp32"), triton::Arg::i32(r.H), triton::Arg::i32(r.dk),
                  triton::Arg::i32(r.dv), triton::Arg::f32(call.scale), triton::Arg::f32(call.cap),
                  triton::Arg::i32(call.causal), triton::Arg::i32(r.has_mask)});
  return {mean, free_energy, lse.permute({0, 2, 1}).contiguous()};
}

// {dq, dk, dv, dbeta} in the inputs' dtypes.
Tensors backward_kernel(const FemSoftmaxBackwardCall& call) {
  const at::Tensor &q_in = call.q, &k_in = call.k, &v_in = call.v, &beta_in = call.beta;
  const double cap = call.cap;
  const at::Tensor key_mask = call.key_mask.value_or(at::Tensor());
  check_read(q_in, k_in, v_in, beta_in, cap, call.scale, key_mask);
  const c10::DeviceGuard guard(q_in.device());
  const ReadInputs r = read_inputs(q_in, k_in, v_in, beta_in, key_mask);
  // The prologue in float32 (README.md, "The Triton kernels"): L = beta F, dL = dF / beta, G = dL exp(cap - L)
  // (clamped: a row that sees no key has P = 0), Delta = dmu . mu + sum_j dL_j per row.
  const auto mean = call.mean.to(at::kFloat), free_energy = call.free_energy.to(at::kFloat);
  const auto d_mean = call.d_mean.defined() ? call.d_mean.to(at::kFloat) : at::zeros_like(mean);
  const auto d_free = call.d_free.defined() ? call.d_free.to(at::kFloat) : at::zeros_like(free_energy);
  const auto b = r.beta.to(at::kFloat).reshape({r.H, r.dv});
  const auto d_log = d_free / b;
  const auto g = (d_log * at::exp(at::clamp_max(cap - b * free_energy, 2 * cap))).contiguous();
  const auto delta = (d_mean * mean + d_log).sum(-1).contiguous();  // [B,T,H]
  const auto d_mean_q = gpu_kernels::kernel_operand(d_mean.to(r.q.scalar_type()));
  const auto lse = call.lse.to(at::kFloat).permute({0, 2, 1}).contiguous();  // [B,T,H], the kernels' layout
  const auto options = r.q.options().dtype(at::kFloat);
  auto dq = at::empty({r.B, r.T, r.H, r.dk}, options), dk = at::empty({r.B, r.S, r.H, r.dk}, options);
  auto dv = at::empty({r.B, r.S, r.H, r.dv}, options), dbeta_terms = at::empty({r.B, r.S, r.H, r.dv}, options);
  const char* el = gpu_kernels::element(r.q.scalar_type());
  const int device = r.q.device().index();
  void* stream = current_stream(r.q.device());
  // Both kernels take the inputs, their outputs, then the sizes and flags.
  auto args = [&](std::initializer_list<triton::Arg> outputs) {
    std::vector<triton::Arg> a{arg(r.q, el), arg(r.k, el), arg(r.v, el), arg(r.beta, el), arg(r.mask, "i8"),
                               arg(r.first_real, "i32"), arg(r.cu_q, "i64"), arg(r.cu_k, "i64"),
                               arg(d_mean_q, el), arg(g, "fp32"), arg(lse, "fp32"), arg(delta, "fp32")};
    a.insert(a.end(), outputs);
    a.insert(a.end(), {triton::Arg::i32(r.H), triton::Arg::i32(r.dk), triton::Arg::i32(r.dv),
                       triton::Arg::f32(call.scale), triton::Arg::f32(cap), triton::Arg::i32(call.causal),
                       triton::Arg::i32(r.has_mask)});
    return a;
  };
  const auto& dkdv = entry_for(triton::kFemSoftmaxReadBwdDkdvKernel, r);
  const auto dkdv_args = args({arg(dk, "fp32"), arg(dv, "fp32"), arg(dbeta_terms, "fp32")});
  triton::launch(dkdv, device, grid_for(dkdv, "BLOCK_N", r.S, r), stream, dkdv_args.data(), dkdv_args.size());
  const auto& dq_entry = entry_for(triton::kFemSoftmaxReadBwdDqKernel, r);
  const auto dq_args = args({arg(dq, "fp32")});
  triton::launch(dq_entry, device, grid_for(dq_entry, "BLOCK_M", r.T, r), stream, dq_args.data(), dq_args.size());
  const std::vector<int64_t> batch_and_time{0, 1};
  const auto dbeta = dbeta_terms.sum(batch_and_time) - (d_free * free_energy / b).sum(batch_and_time);
  return {dq.to(q_in.scalar_type()), dk.to(k_in.scalar_type()), dv.to(v_in.scalar_type()),
          dbeta.reshape(beta_in.sizes()).to(beta_in.scalar_type())};
}

}  // namespace
}  // namespace seqmix::ops

TORCH_LIBRARY_IMPL(seqmix, CUDA, m) {
  seqmix::ops::register_kernel<&seqmix::ops::forward_kernel>(m);
  seqmix::ops::register_kernel<&seqmix::ops::backward_kernel>(m);
}

// Passed on a GPU (an NVIDIA H200, 2026-11-29: every test of python/tests/test_cuda.py::FusedFemSoftmaxReadOnCuda;
// docs/gpu.md): auto takes the kernels on CUDA for the inputs they read.
SEQMIX_GPU_KERNEL_PASSED(seqmix, _fem_softmax_forward);
