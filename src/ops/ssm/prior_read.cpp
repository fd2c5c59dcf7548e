// The selective-SSM prior's normalised read, parallel and step by step (include/seqmix/ops/ssm.h): the one place
// that tiles the prior's parameters over the value streams and the stream of ones, adds the skip term and divides.
#include <ATen/ATen.h>

#include "internal.h"

namespace seqmix::ops {
namespace {

// A per-channel tensor [..., G*c] -> [..., G*(S+1)*c]: the same entry for each of a group's S+1 streams.
at::Tensor per_stream(const at::Tensor& t, int64_t groups, int64_t streams) {
  auto sizes = t.sizes().vec();
  const int64_t c = sizes.back() / groups;
  sizes.back() = groups;
  sizes.push_back(1);
  sizes.push_back(c);
  auto expanded = sizes;
  expanded[expanded.size() - 2] = streams;
  auto out = t.reshape(sizes).expand(expanded);
  return out.flatten(static_cast<int64_t>(out.dim()) - 3);
}

// A [G*c, N] -> [G*(S+1)*c, N].
at::Tensor per_stream_A(const at::Tensor& A, int64_t groups, int64_t streams) {
  return per_stream(A.t(), groups, streams).t().contiguous();
}

// [values, ones] on the stream axis: [..., G, S, c] -> [..., G, S+1, c]; the ones are 0 where mask is false.
at::Tensor with_ones(const at::Tensor& values, const at::Tensor& mask) {
  auto ones_shape = values.sizes().vec();
  ones_shape[ones_shape.size() - 2] = 1;
  auto ones = at::ones(ones_shape, values.options());
  if (mask.defined()) {
    auto shape = mask.sizes().vec();
    shape.insert(shape.end(), 3, 1);
    ones = ones * mask.to(values.scalar_type()).view(shape);
  }
  return at::cat({values, ones}, -2);
}

// y [..., G, S+1, c] (the scan of every stream) -> the S numerators over the normaliser.
at::Tensor normalised(const at::Tensor& y, int64_t streams, double floor) {
  return y.narrow(-2, 0, streams) / y.narrow(-2, streams, 1).clamp_min(floor);
}

// How the read reaches the scan: a layer's read through the dispatcher (ops::ssm_scan), an operator's (fem_ssm_read,
// already inside the dispatcher) by ssm_scan_op itself.
enum class ScanBy { dispatcher, operator_function };

at::Tensor normalised_read_on(ScanBy scan, const at::Tensor& values, const SsmPriorParameters& p, double floor,
                              Impl impl, const at::Tensor& cu_seqlens) {
  TORCH_CHECK(values.dim() == 5, "ssm_normalised_read: values must be [B,T,G,S,c] (got ", values.sizes(), ")");
  const int64_t G = values.size(2), S = values.size(3);
  const auto type = values.scalar_type();
  const auto parts = with_ones(values, p.mask);  // [B,T,G,S+1,c]
  const auto u = parts.flatten(2);
  const at::Tensor delta = per_stream(p.delta.to(type), G, S + 1).contiguous(), A = per_stream_A(p.A.to(type), G, S + 1),
                   b = p.b.to(type), c = p.c.to(type);
  at::Tensor y;
  if (scan == ScanBy::dispatcher) {
    y = ssm_scan(u, delta, A, b, c, {.impl = impl, .cu_seqlens = cu_seqlens}).y;
  } else {
    const std::string name = impl_name(impl);
    const c10::optional<at::Tensor> offsets =
        cu_seqlens.defined() ? c10::optional<at::Tensor>(cu_seqlens) : c10::nullopt;
    y = std::get<0>(ssm_scan_op(SsmScanCall{
        .u = u, .delta = delta, .A = A, .b = b, .c = c, .impl = name, .state = c10::nullopt, .cu_seqlens = offsets}));
  }
  if (p.D.defined()) y = y + u * per_stream(p.D.to(type), G, S + 1);
  return normalised(y.view(parts.sizes()), S, floor);
}

}  // namespace

at::Tensor ssm_normalised_read(const at::Tensor& values, const SsmPriorParameters& prior, double floor, Impl impl,
                               const at::Tensor& cu_seqlens) {
  return normalised_read_on(ScanBy::dispatcher, values, prior, floor, impl, cu_seqlens);
}

at::Tensor ssm_normalised_read_in_operator(const at::Tensor& values, const SsmPriorParameters& prior, double floor,
                                           Impl impl, const at::Tensor& cu_seqlens) {
  return normalised_read_on(ScanBy::operator_function, values, prior, floor, impl, cu_seqlens);
}

at::Tensor ssm_normalised_step(const at::Tensor& values_t, const SsmPriorParameters& p, double floor,
                               at::Tensor& state) {
  TORCH_CHECK(values_t.dim() == 4, "ssm_normalised_step: values_t must be [B,G,S,c] (got ", values_t.sizes(), ")");
  const int64_t G = values_t.size(1), S = values_t.size(2);
  // A, D and the rest in the values' type: the step returns the dtype of its first reduced-precision input, and
  // FEM's decode reads the exponential branch in float32.
  const auto type = values_t.scalar_type();
  const auto parts = with_ones(values_t, p.mask);  // [B,G,S+1,c]
  const auto u = parts.flatten(1);
  const auto step = ssm_step(u, per_stream(p.delta.to(type), G, S + 1).contiguous(),
                             per_stream_A(p.A.to(type), G, S + 1), p.b.to(type), p.c.to(type), state);
  state = step.state;
  at::Tensor y = step.y;
  if (p.D.defined()) y = y + u * per_stream(p.D.to(type), G, S + 1);
  return normalised(y.view(parts.sizes()), S, floor);
}

}  // namespace seqmix::ops
