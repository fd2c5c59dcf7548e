#pragma once
// Shared by the flash-style kernels (softmax attention, the FEM softmax read): block sizes, which keys
// each query row sees, the online-softmax block update and its backward, and the q/k/v argument checks.
#include <ATen/ATen.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "../common/checks.h"
#include "../common/kernel_utils.h"
#include "../common/packing.h"

namespace seqmix::ops {

constexpr int64_t kFlashBlockQ = 96;   // query rows per block (16 panels of the 6-row GEMM micro-kernel)
constexpr int64_t kFlashBlockK = 256;  // keys per block

// Which keys a query row sees: causally (key j <= t + S - T), minus padded keys; a row left with no key
// sees its own position (the naive op's rule). Packed sequences (cu_seqlens, T == S): only the keys of the
// row's own sequence.
struct Visibility {
  bool causal;
  int64_t offset;                 // S - T
  const bool* key_mask = nullptr;  // [B,S] or null
  std::vector<int64_t> first_real;  // per batch row: index of the first real key (S if none)
  SequenceBounds sequences;         // packed: per position, its sequence's first and last position (else empty)

  Visibility(bool causal, int64_t T, int64_t S, int64_t B, const bool* mask, const at::Tensor& cu_seqlens = {})
      : causal(causal), offset(S - T), key_mask(mask) {
    if (cu_seqlens.defined()) sequences = sequence_bounds(cu_seqlens, S);
    if (!mask) return;
    first_real.assign(static_cast<size_t>(B), S);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < S; ++j)
        if (mask[b * S + j]) {
          first_real[static_cast<size_t>(b)] = j;
          break;
        }
  }
  bool packed() const { return !sequences.first.empty(); }
  // First and last key index the query at t may see.
  int64_t first_key(int64_t t) const { return packed() ? sequences.first[static_cast<size_t>(t)] : 0; }
  int64_t last_key(int64_t t, int64_t S) const {
    if (causal) return t + offset;
    return packed() ? sequences.last[static_cast<size_t>(t)] : S - 1;
  }
  // The last query row that sees key j (T == S when packed).
  int64_t last_query(int64_t j, int64_t T) const { return packed() ? sequences.last[static_cast<size_t>(j)] : T - 1; }
  bool row_empty(int64_t b, int64_t t, int64_t S) const {
    return key_mask && first_real[static_cast<size_t>(b)] > last_key(t, S);
  }
  bool visible(int64_t b, int64_t t, int64_t j, int64_t S) const {
    if (j > last_key(t, S) || j < first_key(t)) return false;
    if (!key_mask) return true;
    return key_mask[b * S + j] || (j == t + offset && row_empty(b, t, S));
  }
  // True when every key of [k0,k1) is visible to every row of [r0,r1) (no per-element masking needed): the last
  // row's first key (the largest) and the first row's last key (the smallest) enclose the block.
  bool block_all_visible(int64_t r0, int64_t r1, int64_t k0, int64_t k1, int64_t S) const {
    if (key_mask) return false;
    return first_key(r1 - 1) <= k0 && last_key(r0, S) >= k1 - 1;
  }
  // Sets the hidden entries of the score block [rows r0.., keys k0.., nr x nk] to -inf.
  template <typename T>
  void mask_block(T* score, int64_t b, int64_t r0, int64_t nr, int64_t k0, int64_t nk, int64_t S) const {
    if (block_all_visible(r0, r0 + nr, k0, k0 + nk, S)) return;
    for (int64_t i = 0; i < nr; ++i)
      for (int64_t j = 0; j < nk; ++j)
        if (!visible(b, r0 + i, k0 + j, S)) score[i * nk + j] = -std::numeric_limits<T>::infinity();
  }
};

// Online softmax over one masked score block [nr, nk]: per row m' = max(m, rowmax), the row becomes
// exp(row - m'), l <- alpha l + rowsum with alpha = exp(m - m') returned per row (1, and a zero row, when the
// row sees nothing yet).
template <typename T>
void online_softmax_block(T* score, int64_t nr, int64_t nk, T* m, T* l, T* alpha) {
  const T minus_inf = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < nr; ++i) {
    T* row = score + i * nk;
    const T m_new = std::max(m[i], kernel::row_max(row, nk));
    if (m_new == minus_inf) {
      std::fill(row, row + nk, T(0));
      alpha[i] = T(1);
      continue;
    }
    alpha[i] = kernel::fast_exp(m[i] - m_new);
    kernel::exp_shifted(row, nk, m_new);
    l[i] = alpha[i] * l[i] + kernel::row_sum(row, nk);
    m[i] = m_new;
  }
}

// The probabilities again from the saved row log-sum-exp: P = exp(S - lse) on a masked score block.
template <typename T>
void recompute_probabilities(T* score, int64_t nr, int64_t nk, const T* lse) {
  for (int64_t i = 0; i < nr; ++i) kernel::exp_shifted(score + i * nk, nk, lse[i]);
}

// Softmax backward on a block, in place: dS = P (dP - Delta), Delta per row.
template <typename T>
void softmax_backward_block(T* dp, const T* p, int64_t nr, int64_t nk, const T* delta) {
  for (int64_t i = 0; i < nr; ++i) {
    const T d = delta[i];
    T* ds = dp + i * nk;
    const T* pi = p + i * nk;
    for (int64_t j = 0; j < nk; ++j) ds[j] = pi[j] * (ds[j] - d);
  }
}

// First query block (its first row) that sees key k0: causally t + offset >= k0; packed, not before k0's
// sequence.
inline int64_t first_query_block_row(const Visibility& vis, int64_t k0, int64_t block) {
  const int64_t first_row = vis.causal ? std::max<int64_t>(0, k0 - vis.offset) : vis.first_key(k0);
  return first_row / block * block;
}

inline void check_flash_args(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const at::Tensor& key_mask, double scale, const at::Tensor& cu_seqlens = {}) {
  check_attention_args(op, q, k, v);
  check_key_mask(op, key_mask, k.size(0), k.size(1));
  check_packed_attention(op, q, k, key_mask, cu_seqlens);
  check_kernel_inputs(op, {q, k, v, key_mask});
  check_scale(op, scale);
}

}  // namespace seqmix::ops
