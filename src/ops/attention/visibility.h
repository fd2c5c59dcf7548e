#pragma once
// Shared by the flash-style kernels (softmax attention, the FEM softmax read): which keys each query row
// sees, and the argument checks of the q/k/v layout.
#include <ATen/ATen.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "../checks.h"

namespace seqmix::ops {

// Which keys a query row sees: causally (key j <= t + S - T), minus padded keys; a row left with no key
// sees its own position (the naive op's rule).
struct Visibility {
  bool causal;
  int64_t offset;                 // S - T
  const bool* key_mask = nullptr;  // [B,S] or null
  std::vector<int64_t> first_real;  // per batch row: index of the first real key (S if none)

  Visibility(bool causal, int64_t T, int64_t S, int64_t B, const bool* mask) : causal(causal), offset(S - T), key_mask(mask) {
    if (!mask) return;
    first_real.assign(static_cast<size_t>(B), S);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < S; ++j)
        if (mask[b * S + j]) {
          first_real[static_cast<size_t>(b)] = j;
          break;
        }
  }
  // Last key index the query at t may see.
  int64_t last_key(int64_t t, int64_t S) const { return causal ? t + offset : S - 1; }
  bool row_empty(int64_t b, int64_t t, int64_t S) const {
    return key_mask && first_real[static_cast<size_t>(b)] > last_key(t, S);
  }
  bool visible(int64_t b, int64_t t, int64_t j, int64_t S) const {
    if (j > last_key(t, S)) return false;
    if (!key_mask) return true;
    return key_mask[b * S + j] || (j == t + offset && row_empty(b, t, S));
  }
  // True when every key of [k0,k1) is visible to every row of [r0,r1) (no per-element masking needed).
  bool block_all_visible(int64_t b, int64_t r0, int64_t k1, int64_t S) const {
    if (key_mask) return false;
    return !causal || k1 - 1 <= r0 + offset;
  }
  // Sets the hidden entries of the score block [rows r0.., keys k0.., nr x nk] to -inf.
  template <typename T>
  void mask_block(T* score, int64_t b, int64_t r0, int64_t nr, int64_t k0, int64_t nk, int64_t S) const {
    if (block_all_visible(b, r0, k0 + nk, S)) return;
    for (int64_t i = 0; i < nr; ++i)
      for (int64_t j = 0; j < nk; ++j)
        if (!visible(b, r0 + i, k0 + j, S)) score[i * nk + j] = -std::numeric_limits<T>::infinity();
  }
};

inline void check_flash_args(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const at::Tensor& key_mask) {
  check_rank(q, op, "q", 4, "B,T,H,dk");
  check_rank(k, op, "k", 4, "B,S,H,dk");
  check_rank(v, op, "v", 4, "B,S,H,dv");
  check_same_float_dtype(op, {q, k, v});
  TORCH_CHECK(q.scalar_type() == at::kFloat || q.scalar_type() == at::kDouble, op, ": supports float32 and float64 (got ",
              q.scalar_type(), ")");
  TORCH_CHECK(q.device().is_cpu(), op, ": CPU tensors only");
  TORCH_CHECK(q.size(0) == k.size(0) && k.size(0) == v.size(0) && q.size(2) == k.size(2) && k.size(2) == v.size(2) &&
                  q.size(3) == k.size(3) && k.size(1) == v.size(1),
              op, ": q, k and v disagree in batch, heads, key length or head width (got ", q.sizes(), ", ", k.sizes(),
              ", ", v.sizes(), ")");
  TORCH_CHECK(q.size(1) <= k.size(1), op, ": more queries than keys");
  if (key_mask.defined())
    TORCH_CHECK(key_mask.scalar_type() == at::kBool && key_mask.dim() == 2 && key_mask.size(0) == k.size(0) &&
                    key_mask.size(1) == k.size(1),
                op, ": key_mask must be bool [B,S] (got ", key_mask.scalar_type(), " ", key_mask.sizes(), ")");
}

}  // namespace seqmix::ops
