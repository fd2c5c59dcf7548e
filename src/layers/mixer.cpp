#include "seqmix/layers/mixer.h"

#include <torch/torch.h>

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
  const auto cu = cu_seqlens.contiguous();
  const int64_t* offsets = cu.data_ptr<int64_t>();
  std::vector<torch::Tensor> ys;
  for (int64_t s = 0; s + 1 < cu.numel(); ++s)
    if (offsets[s + 1] > offsets[s]) ys.push_back(forward(x.narrow(1, offsets[s], offsets[s + 1] - offsets[s])));
  return ys.empty() ? torch::zeros_like(x) : torch::cat(ys, 1);  // no positions: [1,0,D]
}

void MixerImpl::check_packed_input(const torch::Tensor& x, const torch::Tensor& cu_seqlens) const {
  check_input(x);
  TORCH_CHECK(x.size(0) == 1, "mixer ", kind_, ": packed sequences (cu_seqlens) take a batch of 1, [1,N,", dim_,
              "] (got ", x.sizes(), ")");
  TORCH_CHECK(cu_seqlens.defined() && cu_seqlens.scalar_type() == torch::kLong && cu_seqlens.dim() == 1 &&
                  cu_seqlens.numel() >= 1 && cu_seqlens.device().is_cpu(),
              "mixer ", kind_, ": cu_seqlens must be a CPU int64 [S+1] tensor, the offsets of S packed sequences");
  const auto cu = cu_seqlens.contiguous();
  const int64_t* offsets = cu.data_ptr<int64_t>();
  const int64_t n = cu.numel();
  TORCH_CHECK(offsets[0] == 0 && offsets[n - 1] == x.size(1), "mixer ", kind_,
              ": cu_seqlens must run from 0 to the packed length ", x.size(1), " (got ", offsets[0], " to ",
              offsets[n - 1], ")");
  for (int64_t i = 1; i < n; ++i)
    TORCH_CHECK(offsets[i] >= offsets[i - 1], "mixer ", kind_, ": cu_seqlens must not decrease (entry ", i, " is ",
                offsets[i], ", after ", offsets[i - 1], ")");
}

torch::Tensor packed_positions(const torch::Tensor& cu_seqlens, int64_t length) {
  const auto positions = torch::arange(length, cu_seqlens.options());
  // The sequence of t is the number of ends cu_seqlens[1..S] at or before t; its first token is cu_seqlens there.
  const auto sequence = torch::bucketize(positions, cu_seqlens.slice(0, 1), /*out_int32=*/false, /*right=*/true);
  return (positions - cu_seqlens.index_select(0, sequence)).unsqueeze(0);
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
