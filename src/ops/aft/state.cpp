// State handoff for AFT (include/seqmix/ops/aft.h, continue_aft_scan): the read continued from a state that
// already holds earlier positions, and the state after the last one, in closed form on top of a zero-start read.
#include <ATen/ATen.h>

#include <vector>

#include "../common/checks.h"
#include "../common/packing.h"
#include "internal.h"
#include "seqmix/ops/aft.h"

namespace seqmix::ops {
namespace {

void check_aft_state(const char* op, const AftState& s, const at::Tensor& k) {
  const bool any = s.numerator.defined() || s.normaliser.defined() || s.key_max.defined();
  const bool all = s.numerator.defined() && s.normaliser.defined() && s.key_max.defined();
  TORCH_CHECK(all || !any, op,
              ": give all three of the initial state (state_numerator, state_normaliser, key_max), or none");
  if (!all) return;
  const std::vector<int64_t> want{k.size(0), k.size(2)};
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor&>{"state_numerator", s.numerator},
                                {"state_normaliser", s.normaliser},
                                {"key_max", s.key_max}}) {
    TORCH_CHECK(t.sizes() == at::IntArrayRef(want), op, ": the initial ", name, " must be [B,C] = [", k.size(0), ",", k.size(2),
                "] (got ", t.sizes(), ")");
    TORCH_CHECK(t.scalar_type() == k.scalar_type(), op, ": the initial ", name, " must have k's dtype ",
                k.scalar_type(), " (got ", t.scalar_type(), ")");
  }
}

// Packed: each sequence's slice continued from its own row of the initial state, [N,C] each.
AftReadWithState continue_packed(const PriorRead& zero_state, const at::Tensor& k, const at::Tensor& mask,
                                 const AftState& initial, bool final_state, const at::Tensor& cu_seqlens) {
  AftReadWithState out{zero_state, {}};
  if (!initial.numerator.defined() && !final_state) return out;
  check_cu_seqlens("aft", cu_seqlens, k.size(0), k.size(1));
  const int64_t sequences = cu_seqlens.numel() - 1;
  TORCH_CHECK(!initial.numerator.defined() || (initial.numerator.dim() == 2 && initial.numerator.size(0) == sequences),
              "aft: packed, the initial states must be one per sequence, [N,C] with N = ", sequences, " (got ",
              initial.numerator.sizes(), ")");
  std::vector<at::Tensor> numerators, normalisers, state_numerators, state_normalisers, key_maxes;
  for (const Segment& s : sequence_segments(cu_seqlens, k.size(1))) {
    const int64_t index = static_cast<int64_t>(numerators.size());
    const auto part = [&](const at::Tensor& x) { return x.defined() ? x.narrow(1, s.begin, s.end - s.begin) : x; };
    const auto one = [&](const at::Tensor& x) { return x.defined() ? x.narrow(0, index, 1) : x; };
    const AftReadWithState r =
        continue_aft_scan({part(zero_state.numerator), part(zero_state.normaliser)}, part(k), part(mask),
                          {one(initial.numerator), one(initial.normaliser), one(initial.key_max)}, final_state);
    numerators.push_back(r.read.numerator);
    normalisers.push_back(r.read.normaliser);
    if (final_state) {
      state_numerators.push_back(r.final_state.numerator);
      state_normalisers.push_back(r.final_state.normaliser);
      key_maxes.push_back(r.final_state.key_max);
    }
  }
  out.read = {at::cat(numerators, 1), at::cat(normalisers, 1)};
  if (final_state)
    out.final_state = {at::cat(state_numerators, 0), at::cat(state_normalisers, 0), at::cat(key_maxes, 0)};
  return out;
}

}  // namespace

AftReadWithState continue_aft_scan(const PriorRead& zero_state, const at::Tensor& k, const at::Tensor& mask,
                                   const AftState& initial, bool final_state, const at::Tensor& cu_seqlens) {
  const char* op = "aft";
  if (cu_seqlens.defined()) return continue_packed(zero_state, k, mask, initial, final_state, cu_seqlens);
  check_aft_state(op, initial, k);
  AftReadWithState out{zero_state, {}};
  const bool from_state = initial.numerator.defined();
  if (!from_state && !final_state) return out;
  const int64_t T = k.size(1);
  // m [B,T,C]: the running max of this call's real keys, -1e30 before the first, as the zero-start read has it.
  const auto real_keys = mask.defined() ? k.masked_fill(mask.logical_not().unsqueeze(-1), -1e30) : k;
  const auto m = T > 0 ? std::get<0>(at::cummax(real_keys, 1)).clamp_min(-1e30) : real_keys;
  at::Tensor joint = m;  // [B,T,C]: the running max over the state's keys and these
  if (from_state) {
    const auto state_max = initial.key_max.unsqueeze(1);  // [B,1,C]
    joint = at::maximum(m, state_max);
    // Both reads moved to the joint max; every exponent <= 0.
    const auto here = (m - joint).exp(), before = (state_max - joint).exp();
    out.read.numerator = zero_state.numerator * here + initial.numerator.unsqueeze(1) * before;
    out.read.normaliser = zero_state.normaliser * here + initial.normaliser.unsqueeze(1) * before;
  }
  if (final_state) {
    if (T == 0) {
      out.final_state = from_state ? initial : fresh_aft_state(k);
    } else {
      out.final_state = {out.read.numerator.select(1, T - 1), out.read.normaliser.select(1, T - 1),
                         joint.select(1, T - 1)};
    }
  }
  return out;
}

}  // namespace seqmix::ops
