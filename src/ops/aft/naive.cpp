// Ground-truth AFT prior: the stabilised recurrence, one ATen step per token.
#include <ATen/ATen.h>

#include <vector>

#include "../common/checks.h"
#include "../common/packing.h"
#include "../common/padding.h"
#include "internal.h"
#include "seqmix/ops/aft.h"

namespace seqmix::ops {

PriorRead aft_naive(const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask, const at::Tensor& cu_seqlens) {
  check_aft_args("aft_naive", k, v, mask);
  check_cu_seqlens("aft_naive", cu_seqlens, k.size(0), k.size(1));
  const at::Tensor keys = finite_padding("aft_naive", "k", k, mask), values = finite_padding("aft_naive", "v", v, mask);
  std::vector<at::Tensor> num, den;
  for (const Segment& sequence : sequence_segments(cu_seqlens, k.size(1))) {
    AftState state = fresh_aft_state(k);  // each sequence from a fresh state
    for (int64_t t = sequence.begin; t < sequence.end; ++t) {
      const auto [numerator, normaliser, state_numerator, state_normaliser, key_max] = aft_step_op(
          AftStepCall{.k_t = keys.select(1, t),
                      .v_t = values.select(1, t),
                      .state_numerator = state.numerator,
                      .state_normaliser = state.normaliser,
                      .key_max = state.key_max,
                      .mask_t = mask.defined() ? c10::optional<at::Tensor>(mask.select(1, t)) : c10::nullopt});
      num.push_back(numerator);
      den.push_back(normaliser);
      state = {state_numerator, state_normaliser, key_max};
    }
  }
  if (num.empty()) return {at::empty_like(k), at::empty_like(k)};
  return {at::cat(num, 1), at::cat(den, 1)};
}

}  // namespace seqmix::ops
