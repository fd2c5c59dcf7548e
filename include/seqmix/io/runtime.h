#pragma once
// Process-wide compute settings and facts: ATen's intra-op threads, the torch library and the BLAS it runs.
// PyPI's LibTorch carries Intel MKL inside libtorch_cpu.so, threaded by the same OpenMP runtime as ATen's
// parallel_for, so a BLAS call made inside a parallel region runs on its caller's thread: nothing to tune.
#include <cstdint>
#include <string>

namespace seqmix {

// ATen intra-op threads = n (0 = all hardware threads); MKL follows ATen's setting.
void set_threads(int n);
// "2.15.0 (/path/to/torch/lib/libtorch_cpu.so)": the running LibTorch's version and where it was loaded from.
std::string torch_description();
// The BLAS that ATen's matmuls run on, e.g. "Intel MKL 2024.2 (inside libtorch_cpu.so)".
std::string blas_description();
// The machine's physical memory in bytes (what a size is checked against before it is allocated).
int64_t physical_memory_bytes();
// bytes as "12.3 GB" (decimal units, one decimal).
std::string gigabytes(double bytes);
// The machine's reference speed: an n x n fp32 matmul, median of 7 after warm-up, in GFLOP/s, on ATen's threads.
double matmul_gflops(int64_t n);

}  // namespace seqmix
