#include "prior.h"

#include <torch/torch.h>

namespace seqmix {

PriorInputs PriorInputs::to(at::ScalarType type) const {
  auto cast = [type](const at::Tensor& t) { return t.defined() ? t.to(type) : t; };
  return {cast(q), cast(k), cast(log_decay), cast(keys), cast(delta), cast(b), cast(c), mask, cast(values), cast(write), cu_seqlens};
}

namespace {
at::ScalarType at_least_float32(const at::Tensor& t) { return at::promote_types(t.scalar_type(), at::kFloat); }
}  // namespace

at::Tensor PriorImpl::read_in_float32(const at::Tensor& values, const PriorInputs& in) {
  const auto type = at_least_float32(values);
  return read(values.to(type), in.to(type)).to(values.scalar_type());
}

at::Tensor PriorImpl::step_in_float32(const at::Tensor& values_t, const PriorInputs& in_t, std::any& state) {
  const auto type = at_least_float32(values_t);
  return step(values_t.to(type), in_t.to(type), state).to(values_t.scalar_type());
}

at::Tensor PriorImpl::prefill(const at::Tensor& values, const PriorInputs& in, std::any& state) {
  std::vector<at::Tensor> ys;
  for (int64_t t = 0; t < values.size(1); ++t) {
    auto at_t = [t](const at::Tensor& x) { return x.defined() ? x.narrow(1, t, 1) : x; };
    const PriorInputs in_t{at_t(in.q), at_t(in.k), at_t(in.log_decay), at_t(in.keys),   at_t(in.delta),
                           at_t(in.b), at_t(in.c), at_t(in.mask),      at_t(in.values), at_t(in.write)};
    ys.push_back(step(values.select(1, t), in_t, state));
  }
  return at::stack(ys, 1);
}

at::Tensor tile_streams(const at::Tensor& t, int64_t n) {
  std::vector<int64_t> reps(static_cast<size_t>(t.dim()), 1);
  reps.back() = n;
  return n == 1 ? t : t.repeat(reps);
}

}  // namespace seqmix
