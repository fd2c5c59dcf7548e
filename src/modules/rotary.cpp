#include "seqmix/modules/rotary.h"

#include <ATen/ATen.h>

namespace seqmix {

namespace {

// Rotates x [B,T,H,d] by angles positions [P,T] (P = 1 or B, fp64) x inverse frequencies.
at::Tensor rotate(const at::Tensor& x, const at::Tensor& positions, double theta) {
  TORCH_CHECK(x.dim() == 4, "apply_rotary: x must have shape [B,T,H,d] (got ", x.sizes(), ")");
  const int64_t T = x.size(1), d = x.size(3), half = d / 2;
  TORCH_CHECK(d % 2 == 0, "apply_rotary: the head width must be even for rotary embeddings (got ", d, ")");
  // Angles in fp64, then cast: positions up to 1e6 keep full fp32 accuracy.
  auto inv_freq = at::pow(theta, -at::arange(half, positions.options()) * (2.0 / static_cast<double>(d)));
  auto angle = positions.unsqueeze(-1) * inv_freq;  // [P, T, d/2]
  auto cos = angle.cos().to(x.scalar_type()).view({positions.size(0), T, 1, half});
  auto sin = angle.sin().to(x.scalar_type()).view({positions.size(0), T, 1, half});
  auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
}

}  // namespace

at::Tensor apply_rotary(const at::Tensor& x, int64_t offset, double theta) {
  auto f64 = x.options().dtype(at::kDouble);
  return rotate(x, at::arange(offset, offset + x.size(1), f64).unsqueeze(0), theta);
}

at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& positions, double theta) {
  TORCH_CHECK(positions.dim() == 2 && positions.size(0) == x.size(0) && positions.size(1) == x.size(1),
              "apply_rotary: positions must have shape [B,T] = [", x.size(0), ",", x.size(1), "] (got ",
              positions.sizes(), ")");
  return rotate(x, positions.to(x.options().dtype(at::kDouble)), theta);
}

}  // namespace seqmix
