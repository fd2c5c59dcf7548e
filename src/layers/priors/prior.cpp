#include "prior.h"

#include <torch/torch.h>

namespace seqmix {

const at::Tensor& PriorInputs::input(const std::string& name) const {
  const auto found = own.find(name);
  if (found == own.end()) throw std::logic_error("prior inputs: no input '" + name + "' (the prior's prepare names it)");
  return found->second;
}

namespace {
// f applied to every per-token tensor of `in` (mask included, cu_seqlens not).
template <class F>
PriorInputs each_input(const PriorInputs& in, F f) {
  PriorInputs out;
  out.q = f(in.q);
  out.k = f(in.k);
  out.mask = f(in.mask);
  out.values = f(in.values);
  out.cu_seqlens = in.cu_seqlens;
  for (const auto& [name, t] : in.own) out.own[name] = f(t);
  return out;
}
}  // namespace

PriorInputs PriorInputs::to(at::ScalarType type) const {
  return each_input(*this, [type](const at::Tensor& t) {
    return t.defined() && t.scalar_type() != at::kBool ? t.to(type) : t;
  });
}

PriorInputs PriorInputs::at_position(int64_t t) const {
  PriorInputs at_t = each_input(*this, [t](const at::Tensor& x) { return x.defined() ? x.narrow(1, t, 1) : x; });
  at_t.cu_seqlens = at::Tensor();
  return at_t;
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
  for (int64_t t = 0; t < values.size(1); ++t) ys.push_back(step(values.select(1, t), in.at_position(t), state));
  return at::stack(ys, 1);
}

at::Tensor tile_streams(const at::Tensor& t, int64_t n) {
  std::vector<int64_t> reps(static_cast<size_t>(t.dim()), 1);
  reps.back() = n;
  return n == 1 ? t : t.repeat(reps);
}

}  // namespace seqmix
