// Row-major GEMM on the small blocks of the fused kernels (sides up to a few hundred). Both operands
// are packed into panels (op(A) in MR-row panels, op(B) in NR-column panels, zero-padded at the edges)
// and a register-blocked MR x NR micro-kernel of FMAs runs over the shared dimension. Written with
// GCC vector extensions, so -march decides the instructions (AVX2 + FMA here). BLAS is not called from
// inside parallel regions: the first platform's OpenBLAS (pthread build) serialised concurrent small calls
// (measured: 49 GF/s on one thread, 28 GF/s for two threads together on 64x64 blocks).
#include <cstring>
#include <vector>

#include "kernel_utils.h"

namespace seqmix::ops::kernel {
namespace {

template <typename T>
struct Tile;
template <>
struct Tile<float> {
  typedef float vec __attribute__((vector_size(32), aligned(4)));
  static constexpr int W = 8;
};
template <>
struct Tile<double> {
  typedef double vec __attribute__((vector_size(32), aligned(8)));
  static constexpr int W = 4;
};

constexpr int MR = 6;

// Packs rows [i0, i0+MR) of op(A) (m x k) as k groups of MR values, zero-padding missing rows.
template <typename T>
void pack_a(bool trans, const T* a, int64_t lda, int64_t m, int64_t k, int64_t i0, T* out) {
  const int64_t rows = std::min<int64_t>(MR, m - i0);
  for (int64_t p = 0; p < k; ++p) {
    T* dst = out + p * MR;
    for (int64_t r = 0; r < rows; ++r) dst[r] = trans ? a[p * lda + i0 + r] : a[(i0 + r) * lda + p];
    for (int64_t r = rows; r < MR; ++r) dst[r] = T(0);
  }
}

// Packs columns [j0, j0+NR) of op(B) (k x n) as k groups of NR values, zero-padding missing columns.
template <typename T, int NR>
void pack_b(bool trans, const T* b, int64_t ldb, int64_t n, int64_t k, int64_t j0, T* out) {
  const int64_t cols = std::min<int64_t>(NR, n - j0);
  for (int64_t p = 0; p < k; ++p) {
    T* dst = out + p * NR;
    if (!trans && cols == NR) {
      std::memcpy(dst, b + p * ldb + j0, sizeof(T) * NR);
      continue;
    }
    for (int64_t c = 0; c < cols; ++c) dst[c] = trans ? b[(j0 + c) * ldb + p] : b[p * ldb + j0 + c];
    for (int64_t c = cols; c < NR; ++c) dst[c] = T(0);
  }
}

template <typename T>
void gemm_impl(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc) {
  using V = typename Tile<T>::vec;
  constexpr int W = Tile<T>::W, NR = 2 * W;
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == T(0)) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  thread_local std::vector<T> a_pack, b_pack;
  const int64_t m_panels = (m + MR - 1) / MR, n_panels = (n + NR - 1) / NR;
  T* ap = scratch(a_pack, static_cast<size_t>(m_panels * MR * k));
  T* bp = scratch(b_pack, static_cast<size_t>(n_panels * NR * k));
  for (int64_t i = 0; i < m_panels; ++i) pack_a(ta, a, lda, m, k, i * MR, ap + i * MR * k);
  for (int64_t j = 0; j < n_panels; ++j) pack_b<T, NR>(tb, b, ldb, n, k, j * NR, bp + j * NR * k);
  for (int64_t jp = 0; jp < n_panels; ++jp) {
    const T* B = bp + jp * NR * k;
    const int64_t j0 = jp * NR, cols = std::min<int64_t>(NR, n - j0);
    for (int64_t ip = 0; ip < m_panels; ++ip) {
      const T* A = ap + ip * MR * k;
      // Twelve named accumulators (an array here ends up on the stack).
      V c00{}, c01{}, c10{}, c11{}, c20{}, c21{}, c30{}, c31{}, c40{}, c41{}, c50{}, c51{};
      for (int64_t p = 0; p < k; ++p) {
        // V is declared with the scalar's alignment, so these are unaligned vector loads.
        const V b0 = *reinterpret_cast<const V*>(B + p * NR);
        const V b1 = *reinterpret_cast<const V*>(B + p * NR + W);
        const T* ar = A + p * MR;
        c00 += ar[0] * b0;
        c01 += ar[0] * b1;
        c10 += ar[1] * b0;
        c11 += ar[1] * b1;
        c20 += ar[2] * b0;
        c21 += ar[2] * b1;
        c30 += ar[3] * b0;
        c31 += ar[3] * b1;
        c40 += ar[4] * b0;
        c41 += ar[4] * b1;
        c50 += ar[5] * b0;
        c51 += ar[5] * b1;
      }
      const V acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
      const int64_t i0 = ip * MR, rows = std::min<int64_t>(MR, m - i0);
      // C = alpha * tile + beta * C (C is not read when beta = 0, as BLAS specifies).
      for (int64_t r = 0; r < rows; ++r) {
        T* dst = c + (i0 + r) * ldc + j0;
        if (cols == NR) {  // a full tile row: two vector loads and stores
          V* d = reinterpret_cast<V*>(dst);
          V* d1 = reinterpret_cast<V*>(dst + W);
          if (beta == T(0)) {
            *d = alpha * acc[r][0];
            *d1 = alpha * acc[r][1];
          } else if (beta == T(1)) {
            *d += alpha * acc[r][0];
            *d1 += alpha * acc[r][1];
          } else {
            *d = beta * *d + alpha * acc[r][0];
            *d1 = beta * *d1 + alpha * acc[r][1];
          }
          continue;
        }
        T tile[NR];
        std::memcpy(tile, &acc[r][0], sizeof(V));
        std::memcpy(tile + W, &acc[r][1], sizeof(V));
        for (int64_t col = 0; col < cols; ++col)
          dst[col] = alpha * tile[col] + (beta == T(0) ? T(0) : beta * dst[col]);
      }
    }
  }
}

}  // namespace

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_impl<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  gemm_impl<double>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace seqmix::ops::kernel
