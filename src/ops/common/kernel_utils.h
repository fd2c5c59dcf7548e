#pragma once
// Building blocks of the fused CPU kernels: row-major GEMM on blocks (block_gemm.cpp), a branch-free exp
// the compiler vectorises, vectorisable row reductions, and per-thread scratch buffers.
#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace seqmix::ops::kernel {

// C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C, all row-major with leading dimensions lda/ldb/ldc
// (op = transpose when the flag is set). Single-threaded, for blocks: called inside parallel_for.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// exp for float: Cephes' range reduction and degree-6 polynomial (about 1 ulp), exactly 0 below -87.3
// (so exp(-inf) = 0). Written with plain comparisons, so loops over arrays vectorise (the kernels are
// compiled with -fno-trapping-math). NaN gives exp(-87.3): a NaN test (x == x) stops GCC vectorising
// the callers' loops, and a NaN input still reaches the outputs through the block products.
// double uses std::exp.
inline float fast_exp(float x) {
  const float keep = x < -87.3f ? 0.0f : 1.0f;
  x = x > -87.3f ? x : -87.3f;  // NaN lands here too, so the float-to-int conversion below is always defined
  x = x > 88.3762626647950f ? 88.3762626647950f : x;
  const float t = x * 1.44269504088896341f + 0.5f;
  int32_t n = static_cast<int32_t>(t);
  n -= static_cast<float>(n) > t ? 1 : 0;  // floor
  const float fx = static_cast<float>(n);
  float r = x - fx * 0.693359375f;
  r = r - fx * -2.12194440e-4f;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * r * r + r + 1.0f;
  const int32_t e = (n + 127) << 23;
  float scale;
  std::memcpy(&scale, &e, sizeof scale);
  return y * scale * keep;
}
inline double fast_exp(double x) { return std::exp(x); }

// Row helpers with 8 independent accumulators, so the reductions vectorise without reassociation flags.
template <typename T>
inline T row_max(const T* x, int64_t n) {
  T acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = -std::numeric_limits<T>::infinity();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int i = 0; i < 8; ++i) acc[i] = x[j + i] > acc[i] ? x[j + i] : acc[i];
  T m = acc[0];
  for (int i = 1; i < 8; ++i) m = acc[i] > m ? acc[i] : m;
  for (; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

template <typename T>
inline T row_sum(const T* x, int64_t n) {
  T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int i = 0; i < 8; ++i) acc[i] += x[j + i];
  T s = 0;
  for (int i = 0; i < 8; ++i) s += acc[i];
  for (; j < n; ++j) s += x[j];
  return s;
}

// sum_i x[i] y[i], with 4 independent accumulators.
template <typename T>
inline T dot(const T* x, const T* y, int64_t n) {
  T acc[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int j = 0; j < 4; ++j) acc[j] += x[i + j] * y[i + j];
  T s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (; i < n; ++i) s += x[i] * y[i];
  return s;
}

// x[j] = exp(x[j] - shift).
template <typename T>
inline void exp_shifted(T* x, int64_t n, T shift) {
  for (int64_t j = 0; j < n; ++j) x[j] = fast_exp(x[j] - shift);
}

// A scratch vector grown on demand and reused by the tasks of one parallel_for chunk.
template <typename T>
T* scratch(std::vector<T>& buffer, size_t size) {
  if (buffer.size() < size) buffer.resize(size);
  return buffer.data();
}

}  // namespace seqmix::ops::kernel
