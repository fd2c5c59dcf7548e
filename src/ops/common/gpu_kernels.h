#pragma once
// What seqmix's GPU kernels read (the Triton kernels registered by src/ops/<family>/fused_cuda.cpp), in one place for
// their checks and for impl=auto, which takes a kernel on a GPU (once it has passed there) only for inputs it reads.
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

}  // namespace seqmix::ops::gpu_kernels
