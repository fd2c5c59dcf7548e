#include "seqmix/modules/rotary.h"

#include <ATen/ATen.h>

namespace seqmix {

at::Tensor apply_rotary(const at::Tensor& x, int64_t offset, double theta) {
  TORCH_CHECK(x.dim() == 4, "apply_rotary: x must have shape [B,T,H,d] (got ", x.sizes(), ")");
  const int64_t T = x.size(1), d = x.size(3), half = d / 2;
  TORCH_CHECK(d % 2 == 0, "apply_rotary: the head width must be even for rotary embeddings (got ", d, ")");
  // Angles in fp64, then cast: positions up to 1e6 keep full fp32 accuracy.
  auto f64 = x.options().dtype(at::kDouble);
  auto inv_freq = at::pow(theta, -at::arange(half, f64) * (2.0 / static_cast<double>(d)));
  auto pos = at::arange(offset, offset + T, f64);
  auto angle = pos.unsqueeze(1) * inv_freq.unsqueeze(0);  // [T, d/2]
  auto cos = angle.cos().to(x.scalar_type()).view({1, T, 1, half});
  auto sin = angle.sin().to(x.scalar_type()).view({1, T, 1, half});
  auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
}

}  // namespace seqmix
