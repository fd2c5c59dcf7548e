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
