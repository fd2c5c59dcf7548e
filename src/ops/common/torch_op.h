#pragma once
// Defining an op family's PyTorch operators, in its declare.cpp's TORCH_LIBRARY_FRAGMENT(seqmix, m): each
// operator is one schema and one C++ function, registered for autograd and below it.
#include <torch/library.h>
#include <torch/torch.h>

#include <string>
#include <tuple>

#include "seqmix/ops/impl.h"
#include "seqmix/ops/prior_read.h"

namespace seqmix::ops {

// The CPU kernel of op f: f with gradient recording off (the dispatcher comes here only below autograd, e.g.
// under torch.inference_mode()).
template <class F, F* f>
struct BelowAutograd;
template <class R, class... Args, R (*f)(Args...)>
struct BelowAutograd<R(Args...), f> {
  static R call(Args... args) {
    at::AutoDispatchBelowADInplaceOrView below;
    torch::NoGradGuard no_grad;
    return f(args...);
  }
};

// Defines `schema` ("name(args) -> outputs") and registers f as its Autograd kernel, which records its own
// backward (a fused kernel's autograd Function, or ATen's graph for a naive twin), and as its CPU kernel
// below autograd.
template <auto f>
void define_op(torch::Library& m, const char* schema) {
  const std::string name(schema, std::string(schema).find('('));
  m.def(schema);
  m.impl(name.c_str(), torch::dispatch(c10::DispatchKey::Autograd, TORCH_FN(f)));
  m.impl(name.c_str(), torch::dispatch(c10::DispatchKey::CPU,
                                       TORCH_FN((BelowAutograd<std::remove_pointer_t<decltype(f)>, f>::call))));
}

// An operator without tensor arguments (an initial state): nothing to dispatch on, one kernel for every key.
template <auto f>
void define_op_without_tensors(torch::Library& m, const char* schema) {
  m.def(schema, TORCH_FN(f));
}

// The pieces of the operators' signatures.
using TensorPair = std::tuple<at::Tensor, at::Tensor>;
inline TensorPair pair(const PriorRead& r) { return {r.numerator, r.normaliser}; }
inline at::Tensor or_undefined(const c10::optional<at::Tensor>& t) { return t.has_value() ? *t : at::Tensor(); }
inline Impl impl_of(c10::string_view name) { return parse_impl(std::string(name)); }
// A state dtype argument: float32 unless given.
inline at::TensorOptions options_of(c10::optional<at::ScalarType> dtype) {
  return at::TensorOptions().dtype(dtype.value_or(at::kFloat));
}

}  // namespace seqmix::ops
