#pragma once
// Defining an op family's PyTorch operators, in its declare.cpp's TORCH_LIBRARY_FRAGMENT(seqmix, m): each
// operator is one schema and one C++ function, registered for autograd and below it.
#include <torch/library.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <optional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "operator_calls.h"
#include "seqmix/ops/impl.h"
#include "seqmix/ops/op_table.h"
#include "seqmix/ops/prior_read.h"

namespace seqmix::ops {

// The <Op>Call a kernel function f (Result f(const <Op>Call&)) takes, and the function of the schema's C++ type that
// the dispatcher registers for it (operator_calls.h).
template <class F>
struct CallOf {
  static_assert(sizeof(F) == 0, "a kernel function takes its operator's call: Result f(const <Op>Call& call)");
};
template <class R, class C>
struct CallOf<R (*)(const C&)> {
  using type = C;
};
template <auto f>
using CallTakenBy = typename CallOf<decltype(f)>::type;
template <auto f>
constexpr auto kernel_of = &CallTakenBy<f>::template as_kernel<f>;

// What define_op reads off operator f's schema. A function-local static, made on first use: a static data member of
// a class template would be constructed in an unspecified order with the registrations that fill it, and could be
// reset after them (a std::string member was, to empty).
struct OperatorSchema {
  std::string name;                     // "gla", for errors
  std::vector<std::string> arguments;   // the arguments' names, for errors
  std::vector<int> state_of_output;     // per output, the argument position of the decode state it continues, or -1
  bool reduced_on_cuda = false;         // takes bfloat16/float16 CUDA tensors as they are (define_op's precision)
};
template <auto f>
OperatorSchema& schema_of() {
  static OperatorSchema schema;
  return schema;
}

// Reduced precision. Every operator takes bfloat16 and float16 tensors besides float32 and float64: they are
// computed in float32 (the kernels' narrowest type) and the outputs come back in the dtype of the first
// reduced-precision input that is not a decode state. An operator with a CUDA kernel of its own for reduced
// precision (define_op's Precision::reduced_on_cuda) takes CUDA tensors as they are and widens for its other
// implementations itself. A decode state (an input an output of the same name
// continues: kv, k_sum, state, ...) comes back in its own dtype. ATen's autocast is off inside an operator,
// so under torch.autocast the naive twins compute in float32 too, as the fused kernels do.
namespace reduced_precision {

inline bool is_reduced(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16);
}
// The dtype of an argument when it is a reduced-precision tensor.
template <class T>
std::optional<at::ScalarType> reduced_dtype(const T&) {
  return std::nullopt;
}
inline std::optional<at::ScalarType> reduced_dtype(const at::Tensor& t) {
  return is_reduced(t) ? std::optional<at::ScalarType>(t.scalar_type()) : std::nullopt;
}
inline std::optional<at::ScalarType> reduced_dtype(const c10::optional<at::Tensor>& t) {
  return t.has_value() ? reduced_dtype(*t) : std::nullopt;
}
// An argument as the kernel takes it: a reduced-precision tensor in float32, anything else as given.
template <class T>
const T& widened(const T& a) {
  return a;
}
inline at::Tensor widened(const at::Tensor& t) { return is_reduced(t) ? t.to(at::kFloat) : t; }
inline c10::optional<at::Tensor> widened(const c10::optional<at::Tensor>& t) {
  return t.has_value() ? c10::optional<at::Tensor>(widened(*t)) : c10::nullopt;
}
// A float32 output back in `dtype` (nullopt: as it is).
inline at::Tensor narrowed(const at::Tensor& t, std::optional<at::ScalarType> dtype) {
  return dtype && t.defined() && t.scalar_type() == at::kFloat ? t.to(*dtype) : t;
}


// A tensor argument the kernels cannot take is one error naming it: sparse, quantized, nested or complex tensors
// would otherwise fail deep inside a kernel or ATen, in many lines that name neither the op nor the argument.
inline void check_dense_real(const at::Tensor& t, const std::string& op, const std::string& name) {
  if (!t.defined()) return;
  const char* what = t.is_nested()                 ? "a nested tensor; pad its sequences or pack them (cu_seqlens)"
                     : t.is_quantized()            ? "a quantized tensor; dequantize it first"
                     : t.layout() != at::kStrided  ? "a sparse tensor; make it dense first (.to_dense())"
                     : t.is_complex()              ? "a complex tensor; seqmix's ops take real ones"
                                                   : nullptr;
  TORCH_CHECK(what == nullptr, op, ": ", name, " is ", what);
}
inline void check_dense_real(const c10::optional<at::Tensor>& t, const std::string& op, const std::string& name) {
  if (t.has_value()) check_dense_real(*t, op, name);
}
template <class T>
void check_dense_real(const T&, const std::string&, const std::string&) {}

// One device per call: the first tensor argument's (a 0-dim CPU tensor, a number, may join any device, as in ATen).
// A tensor elsewhere is one error naming both arguments, before any kernel sees it.
struct DeviceOfCall {
  const at::Tensor* first = nullptr;
  std::string first_name;
  void check(const at::Tensor& t, const std::string& op, const std::string& name) {
    if (!t.defined() || (t.device().is_cpu() && t.dim() == 0)) return;
    if (first == nullptr) {
      first = &t;
      first_name = name;
      return;
    }
    TORCH_CHECK(t.device() == first->device(), op, ": all tensors must be on one device (", first_name, " is on ",
                first->device(), ", ", name, " on ", t.device(), ")");
  }
  void check(const c10::optional<at::Tensor>& t, const std::string& op, const std::string& name) {
    if (t.has_value()) check(*t, op, name);
  }
  template <class T>
  void check(const T&, const std::string&, const std::string&) {}
};

template <class F, F* f>
struct InFloat32;
template <class R, class... Args, R (*f)(Args...)>
struct InFloat32<R(Args...), f> {
  static R call(Args... args) {
    const DeviceOfCall device = check_arguments(std::index_sequence_for<Args...>{}, args...);
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    if (schema_of<f>().reduced_on_cuda && device.first && device.first->is_cuda()) return f(args...);
    return widening(args...);
  }
  // f on float32 copies of the reduced-precision arguments, its outputs narrowed back (the rule above).
  static R widening(Args... args) {
    const std::vector<int>& state_of = schema_of<f>().state_of_output;
    const std::array<std::optional<at::ScalarType>, sizeof...(Args)> dtypes{reduced_dtype(args)...};
    std::optional<at::ScalarType> out_dtype;
    bool any_reduced = false;
    for (size_t i = 0; i < dtypes.size(); ++i) {
      if (!dtypes[i]) continue;
      any_reduced = true;
      const bool is_state = std::find(state_of.begin(), state_of.end(), static_cast<int>(i)) != state_of.end();
      if (!is_state && !out_dtype) out_dtype = dtypes[i];
    }
    if (!any_reduced) return f(args...);
    R r = f(widened(args)...);
    const auto dtype_of_output = [&](size_t i) {
      return i < state_of.size() && state_of[i] >= 0 ? dtypes[state_of[i]] : out_dtype;
    };
    if constexpr (std::is_same_v<R, at::Tensor>) {
      return narrowed(r, dtype_of_output(0));
    } else {
      narrow_outputs(r, dtype_of_output, std::make_index_sequence<std::tuple_size_v<R>>{});
      return r;
    }
  }
  // The checks every call gets; returns the call's device (its first tensor argument that is not a number).
  template <size_t... I>
  static DeviceOfCall check_arguments(std::index_sequence<I...>, const Args&... args) {
    const OperatorSchema& schema = schema_of<f>();
    const auto name = [&](size_t i) { return i < schema.arguments.size() ? schema.arguments[i] : "argument " + std::to_string(i); };
    (check_dense_real(args, schema.name, name(I)), ...);
    DeviceOfCall device;
    (device.check(args, schema.name, name(I)), ...);
    return device;
  }
  template <class DtypeOf, size_t... I>
  static void narrow_outputs(R& r, const DtypeOf& dtype_of_output, std::index_sequence<I...>) {
    ((std::get<I>(r) = narrowed(std::get<I>(r), dtype_of_output(I))), ...);
  }
};

// For an operator defined with Precision::reduced_on_cuda, a CUDA call its kernel does not read as it is (another
// impl, mixed dtypes, a state): the call as every other operator makes it, f on float32 copies.
template <auto f>
auto in_float32(const CallTakenBy<f>& call) {
  using Call = CallTakenBy<f>;
  return call.apply(InFloat32<typename Call::Signature, kernel_of<f>>::widening);
}

}  // namespace reduced_precision

// The device kernel of op f (CPU or CUDA): f with gradient recording off (the dispatcher comes here only below autograd, e.g.
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

// Each operator's documentation by name, written beside its schema (define_op's doc): the op table gives it to
// Python, whose wrappers carry it as their docstring (python/seqmix/_op_wrappers.py, generated from the schemas).
inline std::map<std::string, std::string>& operator_docs() {
  static std::map<std::string, std::string> docs;
  return docs;
}

// How an operator takes bfloat16 and float16 tensors (reduced_precision above).
enum class Precision { in_float32, reduced_on_cuda };

// Defines `schema` ("name(args) -> outputs") and registers f (Result f(const <Op>Call&)), taking reduced precision
// as above, as its Autograd kernel, which records its own backward (a fused kernel's autograd Function, or ATen's
// graph for a naive twin), and as its CPU and CUDA kernel below autograd (f picks the implementation the device
// has). `doc` is the operator's documentation (operator_docs()). The schema is the operator's one declaration:
// <Op>Call, the C++ and the Python entry points are generated from it (scripts/generate_op_wrappers.py, which reads
// the schema and doc from these string literals), and the dispatcher refuses, as the library loads, a generated
// <Op>Call::as_kernel<f> whose C++ type disagrees with it.
// `impls`: the implementations an operator with an `impl` argument takes; the op table lists the operator under its
// family (<Op>Call::kFamily, the folder that defines it) with them.
template <auto f>
void define_op(torch::Library& m, const char* schema, const char* doc, const ImplSet& impls,
               Precision precision = Precision::in_float32) {
  using Call = CallTakenBy<f>;
  constexpr auto kernel = kernel_of<f>;
  using Adapted = reduced_precision::InFloat32<typename Call::Signature, kernel>;
  const c10::FunctionSchema parsed = torch::schema(schema);
  TORCH_CHECK(parsed.name() == Call::kName, "seqmix: define_op of ", parsed.name(), " with a kernel of ", Call::kName);
  OperatorSchema& facts = schema_of<kernel>();
  facts.name = parsed.name();
  for (const auto& argument : parsed.arguments()) facts.arguments.push_back(argument.name());
  std::vector<int>& state_of = facts.state_of_output;
  state_of.assign(parsed.returns().size(), -1);
  for (size_t i = 0; i < parsed.returns().size(); ++i)
    for (size_t j = 0; j < parsed.arguments().size(); ++j)
      if (parsed.returns()[i].name() == parsed.arguments()[j].name()) state_of[i] = static_cast<int>(j);
  facts.reduced_on_cuda = precision == Precision::reduced_on_cuda;
  m.def(schema);
  m.impl(parsed.name().c_str(), torch::dispatch(c10::DispatchKey::Autograd, TORCH_FN(Adapted::call)));
  for (const c10::DispatchKey device : {c10::DispatchKey::CPU, c10::DispatchKey::CUDA})
    m.impl(parsed.name().c_str(),
           torch::dispatch(device, TORCH_FN((BelowAutograd<typename Call::Signature, &Adapted::call>::call))));
  operator_docs()[parsed.name()] = doc;  // once registered: the dispatcher refuses a kernel of another C++ type
  list_operator(Call::kFamily, {parsed.name(), impls});
}
// An operator without an `impl` argument (a decode step, a scaling).
template <auto f>
void define_op(torch::Library& m, const char* schema, const char* doc, Precision precision = Precision::in_float32) {
  define_op<f>(m, schema, doc, ImplSet{}, precision);
}

// An operator without tensor arguments (an initial state): nothing to dispatch on, one kernel for every key.
template <auto f>
void define_op_without_tensors(torch::Library& m, const char* schema, const char* doc) {
  const c10::FunctionSchema parsed = torch::schema(schema);
  TORCH_CHECK(parsed.name() == CallTakenBy<f>::kName, "seqmix: define_op_without_tensors of ", parsed.name(),
              " with a kernel of ", CallTakenBy<f>::kName);
  m.def(schema, TORCH_FN(kernel_of<f>));
  operator_docs()[parsed.name()] = doc;
  list_operator(CallTakenBy<f>::kFamily, {parsed.name()});
}

// The pieces of the operators' signatures.
using TensorPair = std::tuple<at::Tensor, at::Tensor>;
inline TensorPair pair(const PriorRead& r) { return {r.numerator, r.normaliser}; }
inline at::Tensor or_undefined(const c10::optional<at::Tensor>& t) { return t.has_value() ? *t : at::Tensor(); }
inline Impl impl_of(c10::string_view name) { return parse_impl(std::string(name)); }
// The outputs of the scans that carry a state: the read and the final state (undefined unless asked for).
using ReadAndState = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
// q scaled by `scale` when given (flash-linear-attention's scale; seqmix's default is no scaling).
inline at::Tensor scaled(const at::Tensor& q, c10::optional<double> scale) { return scale ? q * *scale : q; }
// A state's dtype and device arguments: float32 on the CPU unless given.
inline at::TensorOptions options_of(c10::optional<at::ScalarType> dtype, c10::optional<at::Device> device = c10::nullopt) {
  return at::TensorOptions().dtype(dtype.value_or(at::kFloat)).device(device.value_or(at::kCPU));
}

}  // namespace seqmix::ops

namespace seqmix::ops {

// A fused kernel as an operator of its own, torch.ops.seqmix._<name> (internal, not API): its CPU kernel computes
// and its Meta kernel only makes the outputs' shapes. The fused ops' autograd Functions call their forward and
// backward kernels through it (ops::kernel::<name>, kernel_operators.h, generated from the schema), so
// torch.compile's tracing, which runs on fake tensors, reaches the shapes and records the kernel as one node of its
// graph, forward and backward alike.
// Both take the operator's <Op>Call (operator_calls.h).
template <auto cpu, auto meta>
void define_kernel(torch::Library& m, const char* schema) {
  static_assert(std::is_same_v<CallTakenBy<cpu>, CallTakenBy<meta>>,
                "the CPU and Meta kernels take one operator's call");
  const c10::FunctionSchema parsed = torch::schema(schema);
  TORCH_CHECK(parsed.name() == CallTakenBy<cpu>::kName, "seqmix: define_kernel of ", parsed.name(), " with kernels of ",
              CallTakenBy<cpu>::kName);
  m.def(schema);
  m.impl(parsed.name().c_str(), torch::dispatch(c10::DispatchKey::CPU, TORCH_FN(kernel_of<cpu>)));
  m.impl(parsed.name().c_str(), torch::dispatch(c10::DispatchKey::Meta, TORCH_FN(kernel_of<meta>)));
}
// A GPU kernel of the operator registers itself from its own file, in its TORCH_LIBRARY_IMPL(seqmix, CUDA, m):
// register_kernel<&f>(m) for f(const <Op>Call&) (src/ops/fem/fused_cuda.cpp); the op's ImplSet, which names the
// kernel operator, finds it there.
template <auto f>
void register_kernel(torch::Library& m) {
  m.impl(CallTakenBy<f>::kName, TORCH_FN(kernel_of<f>));
}

// An optional tensor (a mask, cu_seqlens) through an autograd Function, whose arguments must be defined tensors:
// `as_argument` carries "none" as an empty tensor of `type`, `given` turns it back into the optional the kernel
// operators take.
inline at::Tensor as_argument(const at::Tensor& t, at::ScalarType type) {
  return t.defined() ? t : at::empty({0}, at::TensorOptions().dtype(type));
}
inline c10::optional<at::Tensor> given(const at::Tensor& t) {
  return t.numel() > 0 ? c10::optional<at::Tensor>(t) : c10::nullopt;
}

// A Meta kernel's output: an empty tensor with like's dtype and device and these (possibly symbolic) sizes.
inline at::Tensor empty_meta(const at::Tensor& like, c10::SymIntArrayRef sizes) {
  return at::empty_symint(sizes, like.options());
}

}  // namespace seqmix::ops
