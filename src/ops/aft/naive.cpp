// Ground-truth AFT prior: the stabilised recurrence, one ATen step per token.
#include <ATen/ATen.h>

#include <vector>

#include "../common/checks.h"
#include "../common/packing.h"
#include "../common/padding.h"
#include "seqmix/ops/aft.h"

namespace seqmix::ops {

PriorRead aft_naive(const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask, const at::Tensor& cu_seqlens) {
  check_aft_args("aft_naive", k, v, mask);
  check_cu_seqlens("aft_naive", cu_seqlens, k.size(0), k.size(1));
  const at::Tensor keys = finite_padding("aft_naive", "k", k, mask), values = finite_padding("aft_naive", "v", v, mask);
  std::vector<at::Tensor> num, den;
  for (const Segment& sequence : sequence_segments(cu_seqlens, k.size(1))) {
    auto state = aft_initial_state(k.size(0), k.size(2), k.options());  // each sequence from a fresh state
    for (int64_t t = sequence.begin; t < sequence.end; ++t) {
      auto r = native::aft_step(keys.select(1, t), values.select(1, t), state, mask.defined() ? mask.select(1, t) : at::Tensor());
      num.push_back(r.numerator);
      den.push_back(r.normaliser);
    }
  }
  if (num.empty()) return {at::empty_like(k), at::empty_like(k)};
  return {at::cat(num, 1), at::cat(den, 1)};
}

}  // namespace seqmix::ops
