#pragma once
// What seqmix's GPU kernels read (the Triton kernels registered by src/ops/<family>/fused_cuda.cpp), in one place for
// their checks and for impl=auto, which takes a kernel on a GPU (once it has passed there) only for inputs it reads.
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>

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

}  // namespace seqmix::ops::gpu_kernels
