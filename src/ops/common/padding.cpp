// Finite inputs at masked positions (padding.h).
#include "padding.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace seqmix::ops {

at::Tensor finite_padding(const char* op, const char* name, const at::Tensor& x, const at::Tensor& mask) {
  if (!mask.defined()) return x;
  TORCH_CHECK(mask.scalar_type() == at::kBool && mask.dim() == 2 && x.dim() >= 2 && mask.size(0) == x.size(0) &&
                  mask.size(1) == x.size(1),
              op, ": the mask must be bool [B,T] = [", x.dim() >= 2 ? x.size(0) : -1, ",",
              x.dim() >= 2 ? x.size(1) : -1, "] like ", name, "'s first two sizes (got ", mask.scalar_type(), " ",
              mask.sizes(), ")");
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[0] = mask.size(0);
  shape[1] = mask.size(1);
  return x.masked_fill(mask.logical_not().view(shape) & x.isfinite().logical_not(), 0);
}

AttentionInputs finite_masked_positions(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& key_mask) {
  if (!key_mask.defined()) return {q, k, v};
  const int64_t T = q.size(1), S = k.size(1);
  return {finite_padding(op, "q", q, key_mask.narrow(1, S - T, T)), finite_padding(op, "k", k, key_mask),
          finite_padding(op, "v", v, key_mask)};
}

at::Tensor Window::keys(const at::Tensor& x) const {
  return x.defined() && rows >= 0 ? x.narrow(0, row, rows).narrow(1, begin, length) : x;
}

at::Tensor Window::queries(const at::Tensor& q, const at::Tensor& keys) const {
  if (!q.defined() || rows < 0) return q;
  // Query i is key position i + S - T.
  const int64_t shift = keys.size(1) - q.size(1);
  const int64_t from = std::max<int64_t>(0, begin - shift), to = std::max(from, begin + length - shift);
  return q.narrow(0, row, rows).narrow(1, from, to - from);
}

std::vector<int64_t> first_non_finite(const std::vector<at::Tensor>& key_side) {
  at::Tensor bad;  // [B,S]: some value at this key position is not finite
  for (const at::Tensor& x : key_side) {
    if (!x.defined() || !at::isFloatingType(x.scalar_type())) continue;
    if (x.is_meta() || x.unsafeGetTensorImpl()->is_python_dispatch()) return {};
    // A finite sum means every value is finite (a NaN or an inf makes the sum NaN or inf): one vectorised
    // reduction, no temporaries. Only a non-finite sum (or an overflowing one) pays for the exact mask.
    if (std::isfinite(x.sum().item<double>())) continue;
    const auto here = at::isfinite(x).logical_not();
    if (!here.any().item<bool>()) continue;
    const auto rows = here.reshape({x.size(0), x.size(1), -1}).any(-1);
    bad = bad.defined() ? bad.logical_or(rows) : rows;
  }
  if (!bad.defined()) return {};
  const int64_t S = bad.size(1);
  const auto positions = at::arange(S, bad.options().dtype(at::kLong)).expand_as(bad);
  const auto first = at::where(bad, positions, at::full_like(positions, S)).amin(1).to(at::kCPU).contiguous();
  return {first.data_ptr<int64_t>(), first.data_ptr<int64_t>() + first.numel()};
}

at::Tensor with_prefix(const at::Tensor& out, int64_t row, const at::Tensor& prefix) {
  auto replaced = out.clone();
  replaced.narrow(0, row, 1).narrow(1, 0, prefix.size(1)).copy_(prefix);
  return replaced;
}

}  // namespace seqmix::ops
