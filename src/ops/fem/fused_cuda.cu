// The fused FEM softmax read on CUDA: the CPU kernel's algorithm (fused.cpp, README.md) on tensor cores. One block
// of 4 warps reads 64 query rows (16 per warp) against key blocks of 64: S = scale Q K^T with mma.sync
// m16n8k16 (bfloat16 operands, float32 accumulation), an online softmax per row in registers, and one more pair of
// products per key block, P [c, exp(u - n)], into float32 accumulators [acc_mu, acc_e] held in registers. The
// shift n is per channel, the running max of u = beta c over the keys every row of the block sees (exact
// causality), floored at cap - 40. The backward runs per key block with the scores recomputed from the saved row
// log-sum-exp, as FlashAttention's does; dq is accumulated in float32 with atomics.
//
// Fragment layouts of mma.m16n8k16 (PTX ISA), lane = 4 g + t:
//   A (16x16, row-major): a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B (16x8, k x n):      b0 = (k 2t..2t+1, n g), b1 = (k 2t+8..2t+9, n g)
//   C (16x8, float32):    c0, c1 = (g, 2t), (g, 2t+1); c2, c3 = (g+8, 2t), (g+8, 2t+1)
// so the accumulators of two adjacent n-tiles are exactly an A fragment (P needs no trip through shared memory).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>

#include "fused_cuda.h"

namespace seqmix::ops::fem_cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlockQ = 16 * kWarps;  // query rows per forward block
constexpr int kBlockK = 64;           // keys per step (forward) and per backward block (16 per warp)
constexpr int kPad = 8;               // bf16 padding per shared row: rows stay 16-byte aligned, banks staggered

// Two floats as the bfloat16 pair of one mma register (the first in the low half).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

// d += a b for one 16x8x16 tile.
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The A fragment of rows [row0, row0+16) and columns [col0, col0+16) of a row-major shared tile.
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const bf16* tile, int stride, int row0, int col0, int lane) {
  const bf16* p = tile + (row0 + (lane >> 2)) * stride + col0 + 2 * (lane & 3);
  a[0] = *reinterpret_cast<const uint32_t*>(p);
  a[1] = *reinterpret_cast<const uint32_t*>(p + 8 * stride);
  a[2] = *reinterpret_cast<const uint32_t*>(p + 8);
  a[3] = *reinterpret_cast<const uint32_t*>(p + 8 * stride + 8);
}

// The B fragment (k in [k0, k0+16), n in [n0, n0+8)) of a shared tile stored n-major: (k, n) at tile[n * stride + k].
__device__ __forceinline__ void load_b(uint32_t& b0, uint32_t& b1, const bf16* tile, int stride, int n0, int k0,
                                       int lane) {
  const bf16* p = tile + (n0 + (lane >> 2)) * stride + k0 + 2 * (lane & 3);
  b0 = *reinterpret_cast<const uint32_t*>(p);
  b1 = *reinterpret_cast<const uint32_t*>(p + 8);
}

// The A fragment (16 rows, k in [16 kk, 16 kk + 16)) from the float32 accumulators of n-tiles 2 kk and 2 kk + 1.
__device__ __forceinline__ void accumulators_as_a(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  a[0] = pack_bf16(lo[0], lo[1]);
  a[1] = pack_bf16(lo[2], lo[3]);
  a[2] = pack_bf16(hi[0], hi[1]);
  a[3] = pack_bf16(hi[2], hi[3]);
}

// Which keys a query row sees: the CPU kernels' rule (src/ops/attention/flash_common.h): causally j <= t + S - T,
// a masked key never, except the diagonal key of a row whose every visible key is masked.
struct Visible {
  bool causal;
  const bool* mask;
  const int64_t* first_real;
  int64_t T, S;
  __device__ int64_t last_key(int64_t t) const { return causal ? t + S - T : S - 1; }
  __device__ bool operator()(int64_t b, int64_t t, int64_t j) const {
    if (t >= T || j >= S || j < 0 || j > last_key(t)) return false;
    if (mask == nullptr) return true;
    return mask[b * S + j] || (j == t + S - T && first_real[b] > last_key(t));
  }
};

// Eight bfloat16 (16 bytes) of row `row` of one head of a [B,N,H,width] array from column c (a multiple of 8:
// torch's allocations and the widths 32, 64, 128 keep it 16-byte aligned); zeros past N.
__device__ __forceinline__ uint4 load8(const uint16_t* src, int64_t b, int64_t h, int64_t row, int c, int64_t N,
                                       int64_t H, int width) {
  if (row >= N) return make_uint4(0u, 0u, 0u, 0u);
  return *reinterpret_cast<const uint4*>(src + ((b * N + row) * H + h) * width + c);
}

// Loads rows [row0, row0 + rows) of one head of a [B,N,H,width] bf16 array into a shared tile: row-major
// (tile[r * stride + c], 16-byte stores: stride is a multiple of 8) or transposed (tile[c * stride + r]); rows
// past N are zero.
template <bool kTransposed>
__device__ void load_rows(bf16* tile, int stride, const uint16_t* src, int64_t b, int64_t h, int64_t row0, int rows,
                          int64_t N, int64_t H, int width) {
  const int chunks = width / 8;
  for (int i = threadIdx.x; i < rows * chunks; i += kThreads) {
    const int r = i / chunks, c = (i % chunks) * 8;
    const uint4 x = load8(src, b, h, row0 + r, c, N, H, width);
    if (kTransposed) {
      const bf16* e = reinterpret_cast<const bf16*>(&x);
#pragma unroll
      for (int u = 0; u < 8; ++u) tile[(c + u) * stride + r] = e[u];
    } else {
      *reinterpret_cast<uint4*>(tile + r * stride + c) = x;
    }
  }
}

// ---------------------------------------------------------------------------------------------------- forward

template <int DK, int DV>
struct ForwardLayout {
  static constexpr int kQStride = DK + kPad;       // Qs, Ks: [rows][DK]
  static constexpr int kVStride = kBlockK + kPad;  // Ct, Et: [DV][keys] (channel-major: the B operand's layout)
  static constexpr int64_t kBytes = 2 * (int64_t(kBlockQ) * kQStride + int64_t(kBlockK) * kQStride +
                                         2 * int64_t(DV) * kVStride) +
                                    4 * (int64_t(kBlockK) * DV + 4 * DV);
};

template <int DK, int DV>
__global__ void __launch_bounds__(kThreads) forward_kernel(ForwardArgs a) {
  using L = ForwardLayout<DK, DV>;
  extern __shared__ __align__(16) unsigned char shared[];
  bf16* Qs = reinterpret_cast<bf16*>(shared);            // [kBlockQ][kQStride]
  bf16* Ks = Qs + kBlockQ * L::kQStride;                  // [kBlockK][kQStride]
  bf16* Ct = Ks + kBlockK * L::kQStride;                  // [DV][kVStride]: c of the key block
  bf16* Et = Ct + DV * L::kVStride;                       // [DV][kVStride]: exp(u - n)
  float* Us = reinterpret_cast<float*>(Et + DV * L::kVStride);  // [kBlockK][DV]: u = beta c
  float* shift = Us + kBlockK * DV;                       // [DV]: n
  float* gamma = shift + DV;                              // [DV]: exp(n_old - n)
  float* limit = gamma + DV;                              // [DV]: cap / beta
  float* beta = limit + DV;                               // [DV]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, tq = lane & 3;
  const int64_t T = a.T, S = a.S, H = a.H;
  const int64_t b = blockIdx.z, h = blockIdx.y, r0 = int64_t(blockIdx.x) * kBlockQ;
  const Visible visible{a.visibility.causal, a.visibility.key_mask, a.visibility.first_real, T, S};

  for (int ch = threadIdx.x; ch < DV; ch += kThreads) {
    beta[ch] = a.beta[h * DV + ch];
    limit[ch] = a.cap / beta[ch];
    shift[ch] = a.shift_floor;
  }
  load_rows<false>(Qs, L::kQStride, a.q, b, h, r0, kBlockQ, T, H, DK);
  __syncthreads();
  uint32_t qf[DK / 16][4];
#pragma unroll
  for (int kk = 0; kk < DK / 16; ++kk) load_a(qf[kk], Qs, L::kQStride, warp * 16, kk * 16, lane);

  const int64_t row[2] = {r0 + warp * 16 + g, r0 + warp * 16 + g + 8};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // l: this thread's share of the row sum
  float acc_mu[DV / 8][4], acc_e[DV / 8][4];
#pragma unroll
  for (int nt = 0; nt < DV / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_mu[nt][e] = acc_e[nt][e] = 0.f;

  const int64_t r_last = (r0 + kBlockQ < T ? r0 + kBlockQ : T) - 1;
  const int64_t last = a.visibility.causal ? (r_last + S - T < S - 1 ? r_last + S - T : S - 1) : S - 1;
  const int64_t shared_last = a.visibility.causal ? r0 + S - T : S - 1;  // keys every row of the block sees
  for (int64_t k0 = 0; k0 <= last; k0 += kBlockK) {
    __syncthreads();  // the previous key block's tiles are read
    load_rows<false>(Ks, L::kQStride, a.k, b, h, k0, kBlockK, S, H, DK);
    for (int i = threadIdx.x; i < kBlockK * DV / 8; i += kThreads) {
      const int j = i / (DV / 8), ch0 = (i % (DV / 8)) * 8;
      const int64_t key = k0 + j;
      const uint4 raw = load8(a.v, b, h, key, ch0, S, H, DV);
      const bf16* x = reinterpret_cast<const bf16*>(&raw);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int ch = ch0 + e;
        float c = 0.f, u = -INFINITY;  // past S: no value, no weight, never in the max
        if (key < S) {
          const float value = __bfloat162float(x[e]), lim = limit[ch];
          c = value > lim ? lim : (value < -lim ? -lim : value);
          u = beta[ch] * c;
        }
        Ct[ch * L::kVStride + j] = __float2bfloat16(c);
        Us[j * DV + ch] = u;
      }
    }
    __syncthreads();
    // The shift grows with the keys of this block that every row sees; the exp accumulators follow by gamma.
    const int64_t shared_keys = shared_last - k0 + 1;
    for (int ch = threadIdx.x; ch < DV; ch += kThreads) {
      float n = shift[ch];
      for (int j = 0; j < kBlockK && j < shared_keys; ++j) n = fmaxf(n, Us[j * DV + ch]);
      gamma[ch] = __expf(shift[ch] - n);
      shift[ch] = n;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kBlockK * DV; i += kThreads) {
      const int j = i / DV, ch = i % DV;
      Et[ch * L::kVStride + j] = __float2bfloat16(__expf(Us[j * DV + ch] - shift[ch]));
    }
    __syncthreads();

    // Scores of this warp's 16 rows against the 64 keys: 8 n-tiles of 8 keys.
    float s[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < DK / 16; ++kk) {
        uint32_t b0, b1;
        load_b(b0, b1, Ks, L::kQStride, nt * 8, kk * 16, lane);
        mma(s[nt], qf[kk], b0, b1);
      }
    }
    // Scale, mask, online softmax: row[0] holds entries 0, 1 of each tile, row[1] entries 2, 3.
    float row_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t key = k0 + nt * 8 + 2 * tq + (e & 1);
        const float x = visible(b, row[e >> 1], key) ? s[nt][e] * a.scale : -INFINITY;
        s[nt][e] = x;
        row_max[e >> 1] = fmaxf(row_max[e >> 1], x);
      }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[r] = fmaxf(row_max[r], __shfl_xor_sync(0xffffffffu, row_max[r], 1));
      row_max[r] = fmaxf(row_max[r], __shfl_xor_sync(0xffffffffu, row_max[r], 2));
      const float m_new = fmaxf(m[r], row_max[r]);
      const float base = m_new == -INFINITY ? 0.f : m_new;  // a row that sees nothing yet: zeros, not NaN
      alpha[r] = __expf(m[r] - base);
      m[r] = m_new;
      row_max[r] = base;
      l[r] *= alpha[r];
    }
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = __expf(s[nt][e] - row_max[e >> 1]);
        s[nt][e] = p;
        l[e >> 1] += p;
      }
#pragma unroll
    for (int nt = 0; nt < DV / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        acc_mu[nt][e] *= alpha[e >> 1];
        acc_e[nt][e] *= alpha[e >> 1] * gamma[nt * 8 + 2 * tq + (e & 1)];
      }
    // [acc_mu, acc_e] += P [c, exp(u - n)].
#pragma unroll
    for (int kk = 0; kk < kBlockK / 16; ++kk) {
      uint32_t p[4];
      accumulators_as_a(p, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
      for (int nt = 0; nt < DV / 8; ++nt) {
        uint32_t b0, b1;
        load_b(b0, b1, Ct, L::kVStride, nt * 8, kk * 16, lane);
        mma(acc_mu[nt], p, b0, b1);
        load_b(b0, b1, Et, L::kVStride, nt * 8, kk * 16, lane);
        mma(acc_e[nt], p, b0, b1);
      }
    }
  }

  // Epilogue: mu = acc_mu / l, L = n + log(acc_e) - log l, F = L / beta, lse = m + log l.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row[r] >= T) continue;
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f, log_l = l[r] > 0.f ? logf(l[r]) : 0.f;
    const int64_t at = ((b * T + row[r]) * H + h) * DV;
#pragma unroll
    for (int nt = 0; nt < DV / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int ch = nt * 8 + 2 * tq + e;
        a.mean[at + ch] = acc_mu[nt][2 * r + e] * inv;
        const float log_read = shift[ch] + logf(fmaxf(acc_e[nt][2 * r + e], FLT_MIN)) - log_l;
        a.free_energy[at + ch] = log_read / beta[ch];
      }
    if (tq == 0) a.lse[(b * H + h) * T + row[r]] = l[r] > 0.f ? m[r] + log_l : -INFINITY;
  }
}

// --------------------------------------------------------------------------------------------------- backward

template <int DK, int DV>
struct BackwardLayout {
  static constexpr int kRowDK = DK + kPad;         // Qs: [queries][DK]
  static constexpr int kRowDV = DV + kPad;         // Cs, Es, Gm, Ge: [rows][DV]
  static constexpr int kRowN = kBlockK + kPad;     // Qt, Kt: [DK][64]; Gmt, Get: [DV][64]; dSs: [64][64]
  static constexpr int64_t kBytes =
      2 * (int64_t(kBlockQ) * kRowDK + 2 * int64_t(DK) * kRowN + 4 * int64_t(kBlockK) * kRowDV +
           2 * int64_t(DV) * kRowN + int64_t(kBlockQ) * kRowN) +
      4 * 2 * int64_t(kBlockQ);
};

template <int DK, int DV>
__global__ void __launch_bounds__(kThreads) backward_kernel(BackwardArgs a) {
  using L = BackwardLayout<DK, DV>;
  extern __shared__ __align__(16) unsigned char shared[];
  bf16* Qs = reinterpret_cast<bf16*>(shared);   // [kBlockQ][kRowDK]: B of S^T = K Q^T
  bf16* Qt = Qs + kBlockQ * L::kRowDK;           // [DK][kRowN]: B of dK += dS^T Q
  bf16* Kt = Qt + DK * L::kRowN;                 // [DK][kRowN]: B of dQ += dS K
  bf16* Cs = Kt + DK * L::kRowN;                 // [kBlockK][kRowDV]: A of dP^T (this block's keys)
  bf16* Es = Cs + kBlockK * L::kRowDV;           // [kBlockK][kRowDV]
  bf16* Gm = Es + kBlockK * L::kRowDV;           // [kBlockQ][kRowDV]: B of dP^T = C Gm^T + E Ge^T
  bf16* Ge = Gm + kBlockQ * L::kRowDV;           // [kBlockQ][kRowDV]
  bf16* Gmt = Ge + kBlockQ * L::kRowDV;          // [DV][kRowN]: B of dC += P^T Gm
  bf16* Get = Gmt + DV * L::kRowN;               // [DV][kRowN]: B of dU += P^T Ge
  bf16* dSs = Get + DV * L::kRowN;               // [kBlockQ][kRowN]: dS (queries x keys), A of dQ
  float* lse = reinterpret_cast<float*>(dSs + kBlockQ * L::kRowN);  // [kBlockQ]
  float* delta = lse + kBlockQ;                                      // [kBlockQ]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, tq = lane & 3;
  const int64_t T = a.T, S = a.S, H = a.H;
  const int64_t b = blockIdx.z, h = blockIdx.y, k0 = int64_t(blockIdx.x) * kBlockK;
  const Visible visible{a.visibility.causal, a.visibility.key_mask, a.visibility.first_real, T, S};

  load_rows<true>(Kt, L::kRowN, a.k, b, h, k0, kBlockK, S, H, DK);
  load_rows<false>(Cs, L::kRowDV, a.clipped, b, h, k0, kBlockK, S, H, DV);
  load_rows<false>(Es, L::kRowDV, a.exp_cap, b, h, k0, kBlockK, S, H, DV);
  // This warp's 16 keys as the A operand of S^T (read once, from global memory: [B,S,H,dk] rows).
  uint32_t kf[DK / 16][4];
  {
    const int64_t key_lo = k0 + warp * 16 + g, key_hi = key_lo + 8;
    const uint32_t* k32 = reinterpret_cast<const uint32_t*>(a.k);
#pragma unroll
    for (int kk = 0; kk < DK / 16; ++kk) {
      const int c = kk * 16 + 2 * tq;
      kf[kk][0] = key_lo < S ? k32[(((b * S + key_lo) * H + h) * DK + c) / 2] : 0u;
      kf[kk][1] = key_hi < S ? k32[(((b * S + key_hi) * H + h) * DK + c) / 2] : 0u;
      kf[kk][2] = key_lo < S ? k32[(((b * S + key_lo) * H + h) * DK + c + 8) / 2] : 0u;
      kf[kk][3] = key_hi < S ? k32[(((b * S + key_hi) * H + h) * DK + c + 8) / 2] : 0u;
    }
  }
  const int64_t key[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};
  float dk_acc[DK / 8][4], dc_acc[DV / 8][4], du_acc[DV / 8][4];
#pragma unroll
  for (int nt = 0; nt < DK / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk_acc[nt][e] = 0.f;
#pragma unroll
  for (int nt = 0; nt < DV / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) dc_acc[nt][e] = du_acc[nt][e] = 0.f;

  // The first query block that sees key k0: causally t + S - T >= k0.
  const int64_t first_row = a.visibility.causal ? (k0 - (S - T) > 0 ? k0 - (S - T) : 0) : 0;
  for (int64_t r0 = first_row / kBlockQ * kBlockQ; r0 < T; r0 += kBlockQ) {
    __syncthreads();  // the previous query block's tiles are read
    load_rows<false>(Qs, L::kRowDK, a.q, b, h, r0, kBlockQ, T, H, DK);
    load_rows<true>(Qt, L::kRowN, a.q, b, h, r0, kBlockQ, T, H, DK);
    load_rows<false>(Gm, L::kRowDV, a.g_mean, b, h, r0, kBlockQ, T, H, DV);
    load_rows<false>(Ge, L::kRowDV, a.g_exp, b, h, r0, kBlockQ, T, H, DV);
    load_rows<true>(Gmt, L::kRowN, a.g_mean, b, h, r0, kBlockQ, T, H, DV);
    load_rows<true>(Get, L::kRowN, a.g_exp, b, h, r0, kBlockQ, T, H, DV);
    for (int i = threadIdx.x; i < kBlockQ; i += kThreads) {
      const int64_t t = r0 + i;
      lse[i] = t < T ? a.lse[(b * H + h) * T + t] : INFINITY;
      delta[i] = t < T ? a.delta[(b * H + h) * T + t] : 0.f;
    }
    __syncthreads();

    // S^T (this warp's 16 keys x 64 queries) and dP^T = C Gm^T + E Ge^T, both 8 n-tiles of 8 queries.
    float p[8][4], dp[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) p[nt][e] = dp[nt][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < DK / 16; ++kk) {
        uint32_t b0, b1;
        load_b(b0, b1, Qs, L::kRowDK, nt * 8, kk * 16, lane);
        mma(p[nt], kf[kk], b0, b1);
      }
#pragma unroll
      for (int kc = 0; kc < DV / 16; ++kc) {
        uint32_t ca[4], ea[4], b0, b1;
        load_a(ca, Cs, L::kRowDV, warp * 16, kc * 16, lane);
        load_a(ea, Es, L::kRowDV, warp * 16, kc * 16, lane);
        load_b(b0, b1, Gm, L::kRowDV, nt * 8, kc * 16, lane);
        mma(dp[nt], ca, b0, b1);
        load_b(b0, b1, Ge, L::kRowDV, nt * 8, kc * 16, lane);
        mma(dp[nt], ea, b0, b1);
      }
    }
    // P^T = exp(scale S^T - lse) where visible; dS^T = P^T (dP^T - Delta).
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int qi = nt * 8 + 2 * tq + (e & 1);
        const float row_lse = lse[qi];
        const bool seen = visible(b, r0 + qi, key[e >> 1]) && row_lse != -INFINITY;
        const float pe = seen ? __expf(p[nt][e] * a.scale - row_lse) : 0.f;
        p[nt][e] = pe;
        dp[nt][e] = pe * (dp[nt][e] - delta[qi]);
      }
    // dC += P^T Gm, dU += P^T Ge, dK += dS^T Q: A operands straight from the accumulators (k = queries).
#pragma unroll
    for (int kq = 0; kq < kBlockQ / 16; ++kq) {
      uint32_t pa[4], dsa[4];
      accumulators_as_a(pa, p[2 * kq], p[2 * kq + 1]);
      accumulators_as_a(dsa, dp[2 * kq], dp[2 * kq + 1]);
#pragma unroll
      for (int nt = 0; nt < DV / 8; ++nt) {
        uint32_t b0, b1;
        load_b(b0, b1, Gmt, L::kRowN, nt * 8, kq * 16, lane);
        mma(dc_acc[nt], pa, b0, b1);
        load_b(b0, b1, Get, L::kRowN, nt * 8, kq * 16, lane);
        mma(du_acc[nt], pa, b0, b1);
      }
#pragma unroll
      for (int nt = 0; nt < DK / 8; ++nt) {
        uint32_t b0, b1;
        load_b(b0, b1, Qt, L::kRowN, nt * 8, kq * 16, lane);
        mma(dk_acc[nt], dsa, b0, b1);
      }
    }
    // dS into shared memory as queries x keys, then each warp adds dQ of 16 queries = dS K over the 64 keys.
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        dSs[(nt * 8 + 2 * tq + (e & 1)) * L::kRowN + warp * 16 + g + 8 * (e >> 1)] = __float2bfloat16(dp[nt][e]);
    __syncthreads();
    float dq_acc[DK / 8][4];
#pragma unroll
    for (int nt = 0; nt < DK / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) dq_acc[nt][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kBlockK / 16; ++kk) {
      uint32_t ds[4];
      load_a(ds, dSs, L::kRowN, warp * 16, kk * 16, lane);
#pragma unroll
      for (int nt = 0; nt < DK / 8; ++nt) {
        uint32_t b0, b1;
        load_b(b0, b1, Kt, L::kRowN, nt * 8, kk * 16, lane);
        mma(dq_acc[nt], ds, b0, b1);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int64_t t = r0 + warp * 16 + g + 8 * r;
      if (t >= T) continue;
      float* dq_row = a.dq + ((b * T + t) * H + h) * DK;
#pragma unroll
      for (int nt = 0; nt < DK / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) atomicAdd(dq_row + nt * 8 + 2 * tq + e, a.scale * dq_acc[nt][2 * r + e]);
    }
  }

  // This warp's keys: dk = scale dS^T Q, dc, du_raw (zeros for a key no query sees).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (key[r] >= S) continue;
    const int64_t row = (b * S + key[r]) * H + h;
#pragma unroll
    for (int nt = 0; nt < DK / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) a.dk[row * DK + nt * 8 + 2 * tq + e] = a.scale * dk_acc[nt][2 * r + e];
#pragma unroll
    for (int nt = 0; nt < DV / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        a.dc[row * DV + nt * 8 + 2 * tq + e] = dc_acc[nt][2 * r + e];
        a.du_raw[row * DV + nt * 8 + 2 * tq + e] = du_acc[nt][2 * r + e];
      }
  }
}

// ---------------------------------------------------------------------------------------------------- launches

template <class Layout, class Kernel, class Args>
std::string launch(Kernel kernel, const Args& args, dim3 grid, void* stream) {
  if (grid.x == 0 || grid.y == 0) return "";
  cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(Layout::kBytes));
  if (status == cudaSuccess) {
    kernel<<<grid, kThreads, Layout::kBytes, static_cast<cudaStream_t>(stream)>>>(args);
    status = cudaGetLastError();
  }
  return status == cudaSuccess ? std::string() : std::string(cudaGetErrorString(status));
}

}  // namespace

// The head widths (dk, dv) the kernels are compiled for: X(dk, dv) for each.
#define SEQMIX_FEM_CUDA_HEAD_DIMS(X) X(32, 32) X(64, 64) X(128, 128) X(32, 64) X(64, 32) X(64, 128) X(128, 64)

bool supports_head_dims(int64_t dk, int64_t dv) {
#define SEQMIX_CASE(K, V) \
  if (dk == K && dv == V) return true;
  SEQMIX_FEM_CUDA_HEAD_DIMS(SEQMIX_CASE)
#undef SEQMIX_CASE
  return false;
}

int64_t forward_shared_bytes(int64_t dk, int64_t dv) {
#define SEQMIX_CASE(K, V) \
  if (dk == K && dv == V) return ForwardLayout<K, V>::kBytes;
  SEQMIX_FEM_CUDA_HEAD_DIMS(SEQMIX_CASE)
#undef SEQMIX_CASE
  return 0;
}

int64_t backward_shared_bytes(int64_t dk, int64_t dv) {
#define SEQMIX_CASE(K, V) \
  if (dk == K && dv == V) return BackwardLayout<K, V>::kBytes;
  SEQMIX_FEM_CUDA_HEAD_DIMS(SEQMIX_CASE)
#undef SEQMIX_CASE
  return 0;
}

int64_t device_shared_bytes_limit() {
  int device = 0, bytes = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess)
    return 0;
  return bytes;
}

// Grids: x the query blocks (forward) or key blocks (backward), y the heads, z the batch rows.
std::string launch_forward(const ForwardArgs& args, int64_t dk, int64_t dv, void* stream) {
  const dim3 grid(static_cast<unsigned>((args.T + kBlockQ - 1) / kBlockQ), static_cast<unsigned>(args.H),
                  static_cast<unsigned>(args.B));
#define SEQMIX_CASE(K, V) \
  if (dk == K && dv == V) return launch<ForwardLayout<K, V>>(forward_kernel<K, V>, args, grid, stream);
  SEQMIX_FEM_CUDA_HEAD_DIMS(SEQMIX_CASE)
#undef SEQMIX_CASE
  return "head widths not compiled";
}

std::string launch_backward(const BackwardArgs& args, int64_t dk, int64_t dv, void* stream) {
  const dim3 grid(static_cast<unsigned>((args.S + kBlockK - 1) / kBlockK), static_cast<unsigned>(args.H),
                  static_cast<unsigned>(args.B));
#define SEQMIX_CASE(K, V) \
  if (dk == K && dv == V) return launch<BackwardLayout<K, V>>(backward_kernel<K, V>, args, grid, stream);
  SEQMIX_FEM_CUDA_HEAD_DIMS(SEQMIX_CASE)
#undef SEQMIX_CASE
  return "head widths not compiled";
}

}  // namespace seqmix::ops::fem_cuda
