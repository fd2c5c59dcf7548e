// The fused GLA scan on CUDA tensors (and linear attention's, which is this scan with a zero log decay): the Triton
// kernels of gla_triton.py, compiled ahead of time for the build's GPU architectures (scripts/triton_aot.py) and
// launched on torch's current stream through the CUDA driver (../common/triton_launch.h). This file is the CUDA
// kernel of the kernel operators seqmix::_gla_forward/_gla_backward (defined with their CPU and Meta kernels in
// autograd.cpp) and registers itself with the dispatcher at its end; the build compiles it when torch has CUDA
// (SEQMIX_CUDA). The chunk length and value blocks are the compiled entries' own (launch_configs() in the Python
// file); the argument lists are checked against each kernel's signature at every launch.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/library.h>

#include <cstdint>

#include "../common/checks.h"
#include "../common/gpu_kernels.h"
#include "../common/packing.h"
#include "../common/torch_op.h"
#include "../common/triton_launch.h"
#include "seqmix/ops/impl.h"
#include "fused_kernels.h"
#include "triton_kernels.h"

namespace seqmix::ops {
namespace {

constexpr const char* kOp = "gla (impl fused on CUDA, the Triton kernels)";
using gpu_kernels::current_stream;
using gpu_kernels::arg;
using gpu_kernels::kMaxHeadWidth;
using gpu_kernels::kMaxPrograms;

void check_scan(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_decay,
                const at::Tensor& cu_seqlens) {
  TORCH_CHECK(log_decay.defined(), kOp, ": log_decay is required ([B,T,H] or [B,T,H,dk])");
  check_linear_scan_args(kOp, q, k, v, log_decay);
  check_cu_seqlens(kOp, cu_seqlens, q.size(0), q.size(1));
  const auto dtype = q.scalar_type();
  TORCH_CHECK(gpu_kernels::reads_dtype(dtype), kOp,
              ": the kernels read float32, float16 or bfloat16 (got ", dtype,
              "); impl='chunked' or 'naive' read float64 on a GPU");
  for (const auto& [name, width] : {std::pair<const char*, int64_t>{"dk", q.size(3)}, {"dv", v.size(3)}}) {
    TORCH_CHECK(gpu_kernels::reads_width(width), kOp, ": the head width ", name,
                " must be a multiple of 16 from 16 to ", kMaxHeadWidth, " (got ", width,
                "); impl='chunked' reads any");
  }
  for (const auto& [name, t] :
       {std::pair<const char*, const at::Tensor*>{"log_decay", &log_decay}, {"cu_seqlens", &cu_seqlens}}) {
    TORCH_CHECK(!t->defined() || t->device() == q.device(), kOp, ": ", name, " must be on q's device ", q.device(),
                " (got ", t->device(), ")");
  }
  TORCH_CHECK(q.size(0) * q.size(1) <= gpu_kernels::kMaxRows, kOp, ": B*T = ", q.size(0) * q.size(1),
              " positions exceed the kernels' int32 rows; split the batch");
  const int64_t sequences = cu_seqlens.defined() ? cu_seqlens.numel() - 1 : q.size(0);
  TORCH_CHECK(sequences * q.size(2) <= kMaxPrograms, kOp, ": sequences * H = ", sequences * q.size(2),
              " exceeds the kernels' grid (", kMaxPrograms, "); split the batch");
}

// The inputs as the kernels read them (the Python file's layout conventions): contiguous, one dtype; the sequences
// as cu (int64 [N+1]: cu_seqlens, or T * arange(B+1)).
struct ScanInputs {
  at::Tensor q, k, v, g, cu;
  int64_t B, T, H, dk, dv, sequences;
  bool per_key;
  int arch;
};

ScanInputs scan_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_decay,
                       const at::Tensor& cu_seqlens) {
  ScanInputs s;
  using gpu_kernels::kernel_operand;
  s.q = kernel_operand(q), s.k = kernel_operand(k), s.v = kernel_operand(v);
  s.g = kernel_operand(log_decay.to(q.scalar_type()));
  s.B = q.size(0), s.T = q.size(1), s.H = q.size(2), s.dk = q.size(3), s.dv = v.size(3);
  s.cu = cu_seqlens.defined() ? cu_seqlens.contiguous()
                              : at::arange(s.B + 1, q.options().dtype(at::kLong)) * s.T;
  s.sequences = s.cu.numel() - 1;
  s.per_key = log_decay.dim() == 4;
  s.arch = triton::arch_for_device(triton::kTritonKernels, q.device().index());
  return s;
}

const triton::KernelEntry& scan_entry(const char* kernel, const ScanInputs& s) {
  return triton::find_kernel(triton::kTritonKernels, kernel, gpu_kernels::entry_dtype(s.q.scalar_type()), s.arch,
                             {{"BK", s.dk <= 64 ? 64 : 128},
                              {"PER_KEY", s.per_key},
                              {"EXACT", s.q.scalar_type() == at::kFloat}});
}

// One program per block of BV value columns per sequence and head.
triton::Grid value_grid(const triton::KernelEntry& entry, const ScanInputs& s) {
  const int64_t bv = triton::constexpr_of(entry, "BV");
  return {static_cast<unsigned>((s.dv + bv - 1) / bv), static_cast<unsigned>(s.sequences * s.H), 1};
}

using Tensors = std::vector<at::Tensor>;

// {numerator [B,T,H,dv], normaliser [B,T,H], states}. The backward recomputes the chunk states from q, k, v and the
// decay (README.md, "The Triton kernels"), so none are kept: states is a zero-stride view of zeros with the shape
// the Meta kernel gives ([B,H,chunks,dk,dv+1]), which costs no memory.
Tensors forward_kernel(const GlaForwardCall& call) {
  const at::Tensor &q_in = call.q, &k_in = call.k, &v_in = call.v, &log_decay = call.log_decay;
  const at::Tensor cu_seqlens = call.cu_seqlens.value_or(at::Tensor());
  check_scan(q_in, k_in, v_in, log_decay, cu_seqlens);
  const c10::DeviceGuard guard(q_in.device());
  const ScanInputs s = scan_inputs(q_in, k_in, v_in, log_decay, cu_seqlens);
  const auto floats = s.q.options().dtype(at::kFloat);
  auto num = at::empty({s.B, s.T, s.H, s.dv}, floats), den = at::empty({s.B, s.T, s.H}, floats);
  // The final state, written (store_final = 1) as the Python Function's launch writes it, and not returned.
  auto ht = at::empty({s.sequences, s.H, s.dk, s.dv}, floats), zt = at::empty({s.sequences, s.H, s.dk}, floats);
  const auto none = at::zeros({1}, floats);  // the initial state, not read (use_initial = 0)
  const char* el = gpu_kernels::element(s.q.scalar_type());
  const auto& entry = scan_entry(triton::kChunkGlaFwdKernel, s);
  triton::launch(entry, s.q.device().index(), value_grid(entry, s), current_stream(s.q.device()),
                 {arg(s.q, el), arg(s.k, el), arg(s.v, el), arg(s.g, el), arg(none, "fp32"), arg(none, "fp32"),
                  arg(num, "fp32"), arg(den, "fp32"), arg(ht, "fp32"), arg(zt, "fp32"), arg(s.cu, "i64"),
                  triton::Arg::i32(s.H), triton::Arg::i32(s.dk), triton::Arg::i32(s.dv), triton::Arg::f32(1.0f),
                  triton::Arg::i32(1), triton::Arg::i32(0), triton::Arg::i32(1)});
  const auto chunks = chunk_capacity(s.T, cu_seqlens.defined() ? s.sequences : int64_t{0}, gla_kernel::kChunk);
  const auto states = at::zeros({1}, q_in.options()).expand({s.B, s.H, chunks, s.dk, s.dv + 1});
  return {num.to(q_in.scalar_type()), den.to(q_in.scalar_type()), states};
}

// {dq, dk, dv, dlog_decay} in the inputs' dtypes.
// call.states: none kept (the forward's zero-stride view).
Tensors backward_kernel(const GlaBackwardCall& call) {
  const at::Tensor &q_in = call.q, &k_in = call.k, &v_in = call.v, &log_decay = call.log_decay;
  const at::Tensor &grad_numerator = call.grad_numerator, &grad_normaliser = call.grad_normaliser;
  const at::Tensor cu_seqlens = call.cu_seqlens.value_or(at::Tensor());
  check_scan(q_in, k_in, v_in, log_decay, cu_seqlens);
  const c10::DeviceGuard guard(q_in.device());
  const ScanInputs s = scan_inputs(q_in, k_in, v_in, log_decay, cu_seqlens);
  const auto dtype = s.q.scalar_type();
  const auto floats = s.q.options().dtype(at::kFloat);
  const auto d_num = gpu_kernels::kernel_operand(
      grad_numerator.defined() ? grad_numerator.to(dtype) : at::zeros({s.B, s.T, s.H, s.dv}, s.q.options()));
  const auto d_den = gpu_kernels::kernel_operand(
      grad_normaliser.defined() ? grad_normaliser.to(dtype) : at::zeros({s.B, s.T, s.H}, s.q.options()));
  const auto none = at::zeros({1}, floats);  // the initial state, not read (use_initial = 0)
  const auto dht = at::zeros({s.sequences, s.H, s.dk, s.dv}, floats), dzt = at::zeros({s.sequences, s.H, s.dk}, floats);
  const char* el = gpu_kernels::element(dtype);
  const int device = s.q.device().index();
  void* stream = current_stream(s.q.device());
  const auto& entry = scan_entry(triton::kChunkGlaBwdKernel, s);
  const triton::Grid grid = value_grid(entry, s);
  // Each value block's programs add their share of dq, dk and the final decay gradient: one slice each, summed.
  const int64_t blocks = grid.x;
  auto dq = at::empty({blocks, s.B, s.T, s.H, s.dk}, floats), dk = at::empty({blocks, s.B, s.T, s.H, s.dk}, floats);
  auto dv = at::empty({s.B, s.T, s.H, s.dv}, floats);
  auto dh0 = at::empty({s.sequences, s.H, s.dk, s.dv}, floats), dz0 = at::empty({s.sequences, s.H, s.dk}, floats);
  auto dg_final = at::empty({blocks, s.sequences, s.H, s.dk}, floats);
  triton::launch(entry, device, grid, stream,
                 {arg(s.q, el), arg(s.k, el), arg(s.v, el), arg(s.g, el), arg(none, "fp32"), arg(none, "fp32"),
                  arg(d_num, el), arg(d_den, el), arg(dht, "fp32"), arg(dzt, "fp32"), arg(dq, "fp32"),
                  arg(dk, "fp32"), arg(dv, "fp32"), arg(dh0, "fp32"), arg(dz0, "fp32"), arg(dg_final, "fp32"),
                  arg(s.cu, "i64"), triton::Arg::i32(s.H), triton::Arg::i32(s.dk), triton::Arg::i32(s.dv),
                  triton::Arg::i32(s.B * s.T), triton::Arg::f32(1.0f), triton::Arg::i32(1), triton::Arg::i32(0),
                  triton::Arg::i32(0)});
  const auto dq_sum = dq.sum(0), dk_sum = dk.sum(0), dg_final_sum = dg_final.sum(0);
  auto dg = at::empty(s.g.sizes(), floats);
  const auto& decay =
      triton::find_kernel(triton::kTritonKernels, triton::kChunkGlaBwdDecayKernel, gpu_kernels::entry_dtype(dtype),
                          s.arch, {{"BK", s.dk <= 64 ? 64 : 128}, {"PER_KEY", s.per_key}});
  triton::launch(decay, device, {static_cast<unsigned>(s.sequences * s.H), 1, 1}, stream,
                 {arg(s.q, el), arg(s.k, el), arg(dq_sum, "fp32"), arg(dk_sum, "fp32"), arg(dg_final_sum, "fp32"),
                  arg(dg, "fp32"), arg(s.cu, "i64"), triton::Arg::i32(s.H), triton::Arg::i32(s.dk)});
  return {dq_sum.to(q_in.scalar_type()), dk_sum.to(k_in.scalar_type()), dv.to(v_in.scalar_type()),
          dg.to(log_decay.scalar_type())};
}

}  // namespace
}  // namespace seqmix::ops

TORCH_LIBRARY_IMPL(seqmix, CUDA, m) {
  seqmix::ops::register_kernel<&seqmix::ops::forward_kernel>(m);
  seqmix::ops::register_kernel<&seqmix::ops::backward_kernel>(m);
}

// Passed on a GPU (an NVIDIA H200, 2026-11-29: every test of python/tests/test_cuda.py::FusedScanOnCuda;
// docs/gpu.md): auto takes the kernels on CUDA for the inputs they read.
SEQMIX_GPU_KERNEL_PASSED(seqmix, _gla_forward);
