#pragma once
// The energy paper's M_h (§3.2): M_h y = W_h^T (W_h W_h^T)^-1 y, the minimum-norm preimage of y under a head's query
// map W_h [d_h, D], one solve against the [d_h, d_h] Gram matrix per head. MHA2nd1st maps its read back to the model
// width through it, and the energy mixer's Newton-Taylor step its direction.
#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

namespace seqmix {

// w [H,d_h,D], y [B,T,H,d_h] -> [B,T,H,D] in y's dtype. Computed in float32 at least, autocast off: ATen's solve has
// no reduced-precision kernel, and a Gram matrix rounded to bfloat16 loses what its condition needs.
inline at::Tensor query_preimage(const at::Tensor& w, const at::Tensor& y) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  const auto type = at::promote_types(at::promote_types(w.scalar_type(), y.scalar_type()), at::kFloat);
  const auto W = w.to(type);
  const int64_t H = W.size(0), dh = W.size(1), D = W.size(2);
  const auto rhs = y.to(type).permute({2, 3, 0, 1}).reshape({H, dh, -1});                          // [H,d_h,B*T]
  const auto mapped = at::matmul(W.transpose(1, 2), at::linalg_solve(at::matmul(W, W.transpose(1, 2)), rhs));  // [H,D,B*T]
  return mapped.view({H, D, y.size(0), y.size(1)}).permute({2, 3, 0, 1}).to(y.scalar_type());
}

}  // namespace seqmix
