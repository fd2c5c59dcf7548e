#pragma once
// What seqmix's GPU kernels read (the Triton kernels registered by src/ops/<family>/fused_cuda.cpp), in one place for
// their checks and for impl=auto, which takes a kernel on a GPU (once it has passed there) only for inputs it reads.
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <cstdint>

#include "triton_launch.h"

namespace seqmix::ops::gpu_kernels {

// Head widths: multiples of 16 up to 128 (held in blocks of 64 or 128).
constexpr int64_t kMaxHeadWidth = 128;
constexpr bool reads_width(int64_t d) { return d % 16 == 0 && d >= 16 && d <= kMaxHeadWidth; }
// Input dtypes (float64 is the naive twins' and the ATen forms').
constexpr bool reads_dtype(c10::ScalarType t) {
  return t == c10::ScalarType::Float || t == c10::ScalarType::Half || t == c10::ScalarType::BFloat16;
}
// Programs along the grid's y axis: sequences * heads.
constexpr int64_t kMaxPrograms = 65535;
// Rows (positions) the kernels index in int32.
constexpr int64_t kMaxRows = (int64_t{1} << 31) - 1;

// A tensor as the compiled kernels read it: contiguous and 16-byte aligned (the cubins are specialised for aligned
// pointers, as Triton's JIT specialises them; a view at an odd offset is copied).
inline at::Tensor kernel_operand(const at::Tensor& t) {
  at::Tensor out = t.contiguous();
  return reinterpret_cast<uintptr_t>(out.data_ptr()) % 16 == 0 ? out : out.clone();
}

// The launcher's names of a dtype the kernels read: the compiled entries' ("float32") and a pointer's element ("fp32").
inline const char* entry_dtype(at::ScalarType t) {
  return t == at::kFloat ? "float32" : t == at::kHalf ? "float16" : "bfloat16";
}
inline const char* element(at::ScalarType t) { return t == at::kFloat ? "fp32" : t == at::kHalf ? "fp16" : "bf16"; }
// A tensor's data as a kernel argument of element type `element_type`.
inline triton::Arg arg(const at::Tensor& t, const char* element_type) {
  return triton::Arg::pointer(t.data_ptr(), element_type);
}
// Torch's current stream on `device`; a CPU tensor reaches a launch only under triton::DryRun (recorded, not made).
inline void* current_stream(const at::Device& device) {
  return device.is_cuda() ? c10::impl::VirtualGuardImpl(device.type()).getStream(device).native_handle() : nullptr;
}

}  // namespace seqmix::ops::gpu_kernels
