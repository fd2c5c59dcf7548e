// The free-energy read through a prior linear in its values (include/seqmix/ops/fem.h): the one place where FEM
// turns a prior's read of [clip(v), exp(u - shift)] into mu and F, for the layer's forward and decode step and
// for the fem_*_read operators. Derivation in README.md.
#include <ATen/ATen.h>

#include <limits>

#include "internal.h"
#include "seqmix/ops/fem.h"

namespace seqmix::ops {
namespace {

// The smallest normal number of t's floating-point type: the floor of z before its log.
at::Tensor smallest_normal(const at::Tensor& t) {
  const double tiny = t.scalar_type() == at::kDouble ? std::numeric_limits<double>::min()
                                                      : static_cast<double>(std::numeric_limits<float>::min());
  return at::scalar_tensor(tiny, t.options());
}

}  // namespace

FemRead fem_free_energy_read(const at::Tensor& v, const at::Tensor& beta, double cap, const ShiftOf& shift_of,
                             const at::Tensor& support, at::ScalarType read_type, const ValueRead& read,
                             ScaleValuesBy scale) {
  // Sizes as SymInts: the Meta kernel runs this code under torch.compile with symbolic shapes.
  const at::Tensor v_flat = v.flatten(v.dim() - beta.dim()), beta_flat = beta.flatten();
  const FemValues flat = scale == ScaleValuesBy::dispatcher
                             ? fem_scale_values(v_flat, beta_flat, cap)
                             : values_of(fem_scale_values_op(FemScaleValuesCall{v_flat, beta_flat, cap}));
  const auto clipped = flat.clipped.view_symint(v.sym_sizes()), scaled = flat.scaled.view_symint(v.sym_sizes());
  const at::Tensor shift = shift_of ? shift_of(scaled) : at::scalar_tensor(cap, v.options().dtype(at::kDouble));
  // In read_type: u - shift lies in [-2 cap, 0], where bfloat16's spacing (0.25 at 40) would erase u.
  auto exponent = scaled.to(read_type) - shift.to(read_type);
  if (support.defined())
    exponent = at::where(support, exponent, at::full_like(exponent, -std::numeric_limits<double>::infinity()));
  const auto r = read(at::cat({clipped.to(read_type), exponent.exp()}, -1));
  const auto width = clipped.sym_size(-1);
  const auto mean = r.narrow_symint(-1, 0, width), z = r.narrow_symint(-1, width, width);
  const auto free_energy = (at::maximum(z, smallest_normal(z)).log() + shift.to(read_type)) / beta.to(read_type);
  return {mean.to(v.scalar_type()), free_energy.to(v.scalar_type())};
}

FemRead fem_capped_read(const char* op, const at::Tensor& v, const at::Tensor& beta, double cap, const ValueRead& read,
                        at::ScalarType read_type) {
  TORCH_CHECK(v.dim() == 3 || v.dim() == 4, op, ": v must be [B,T,H,dv] or [B,T,C] (got ", v.sizes(), ")");
  TORCH_CHECK(cap > 0 && cap <= kMaxConstantShiftCap, op, ": cap must be in (0, ", kMaxConstantShiftCap, "] (got ",
              cap, ")");
  const auto channel_shape = v.sym_sizes().slice(2);  // [H,dv] or [C]
  const c10::SymInt channels = c10::multiply_integers(channel_shape);
  TORCH_SYM_CHECK(beta.sym_numel().sym_eq(channels), op, ": beta must have ", channels,
                  " entries, one per value channel (got ", beta.sym_sizes(), ")");
  return fem_free_energy_read(v, beta.reshape_symint(channel_shape), cap, {}, {}, read_type, read,
                              ScaleValuesBy::operator_function);
}

}  // namespace seqmix::ops
