#include "seqmix/layers/mixer.h"

#include <torch/torch.h>

#include "../ops/common/packing.h"  // the cu_seqlens checks and sequences the ops use
#include "seqmix/io/error.h"

namespace seqmix {

MixerImpl::MixerImpl(std::string kind, int64_t dim, bool causal)
    : kind_(std::move(kind)), dim_(dim), causal_(causal) {
  if (dim <= 0) throw Error("mixer " + kind_ + ": model width must be positive (got " + std::to_string(dim) + ")");
}

DecodeState MixerImpl::init_state(int64_t batch) const {
  throw Error("mixer " + kind_ + " does not decode step by step");
}

torch::Tensor MixerImpl::step(const torch::Tensor& x_t, DecodeState& state) {
  throw Error("mixer " + kind_ + " does not decode step by step");
}

torch::Tensor MixerImpl::prefill(const torch::Tensor& x, DecodeState& state) {
  check_input(x);
  std::vector<torch::Tensor> ys;
  ys.reserve(x.size(1));
  for (int64_t t = 0; t < x.size(1); ++t) ys.push_back(step(x.select(1, t), state));
  return torch::stack(ys, 1);
}

torch::Tensor MixerImpl::forward_masked(const torch::Tensor& x, const torch::Tensor& padding_mask) {
  throw Error("mixer " + kind_ + " does not take a padding mask");
}

torch::Tensor MixerImpl::forward_packed(const torch::Tensor& x, const torch::Tensor& cu_seqlens) {
  check_packed_input(x, cu_seqlens);
  std::vector<torch::Tensor> ys;
  for (const ops::Segment& s : ops::sequence_segments(cu_seqlens, x.size(1)))
    if (s.end > s.begin) ys.push_back(forward(x.narrow(1, s.begin, s.end - s.begin)));
  return ys.empty() ? torch::zeros_like(x) : torch::cat(ys, 1);  // no positions: [1,0,D]
}

void MixerImpl::check_packed_input(const torch::Tensor& x, const torch::Tensor& cu_seqlens) const {
  check_input(x);
  TORCH_CHECK(cu_seqlens.defined(), "mixer ", kind_, ": forward_packed needs cu_seqlens");
  ops::check_cu_seqlens(("mixer " + kind_).c_str(), cu_seqlens, x.size(0), x.size(1));
}

torch::Tensor packed_positions(const torch::Tensor& cu_seqlens, int64_t length) {
  // A token's position is its distance from its sequence's first token, cu_seqlens[its sequence].
  const auto positions = torch::arange(length, cu_seqlens.options());
  return (positions - cu_seqlens.index_select(0, ops::sequence_ids(cu_seqlens, length))).unsqueeze(0);
}

torch::Tensor cu_seqlens_of_starts(const torch::Tensor& sequence_starts) {
  auto starts = sequence_starts.to(torch::kBool).clone();
  starts.select(1, 0).fill_(true);
  const auto begins = starts.flatten().nonzero().flatten();
  return torch::cat({begins, torch::full({1}, starts.numel(), begins.options())});
}

void MixerImpl::check_input(const torch::Tensor& x) const {
  TORCH_CHECK(x.dim() == 3 && x.size(2) == dim_, "mixer ", kind_, ": input must have shape [B,T,", dim_,
              "] (got ", x.sizes(), ")");
}

void MixerImpl::check_decodable() const {
  if (!causal_) throw Error("mixer " + kind_ + " is bidirectional (causal=0) and cannot decode step by step");
}

void MixerImpl::check_step_input(const torch::Tensor& x_t) const {
  check_decodable();
  TORCH_CHECK(x_t.dim() == 2 && x_t.size(1) == dim_, "mixer ", kind_, ": step input must have shape [B,", dim_,
              "] (got ", x_t.sizes(), ")");
}

}  // namespace seqmix
