// State handoff for the selective scan (include/seqmix/ops/ssm.h, ssm_scan_from_state): the initial state's
// contribution and the final state in closed form on top of a zero-start scan.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "seqmix/ops/ssm.h"

namespace seqmix::ops {

ScanWithState ssm_scan_from_state(const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A, const at::Tensor& b,
                                  const at::Tensor& c, const at::Tensor& initial, bool final_state, Impl impl) {
  ScanWithState out{ssm_scan(u, delta, A, b, c, impl), {}};
  if (!initial.defined() && !final_state) return out;
  const int64_t B = u.size(0), T = u.size(1), C = u.size(2), N = A.size(1);
  if (initial.defined()) {
    TORCH_CHECK(initial.sizes() == at::IntArrayRef({B, C, N}), "ssm_scan: the initial state must be [B,C,N] = [", B, ",",
                C, ",", N, "] (got ", initial.sizes(), ")");
    TORCH_CHECK(initial.scalar_type() == u.scalar_type(), "ssm_scan: the initial state must have u's dtype ",
                u.scalar_type(), " (got ", initial.scalar_type(), ")");
  }
  const at::Tensor D = delta.cumsum(1);  // [B,T,C]: the step sizes from before position 1 to t
  if (initial.defined()) {
    const auto carried = (D.unsqueeze(-1) * A).exp() * initial.unsqueeze(1);  // e^{A D_t} h_0 [B,T,C,N]
    out.y = out.y + at::einsum("btcn,btn->btc", {carried, c});
  }
  if (final_state) {
    if (T == 0) {
      out.final_state = initial.defined() ? initial : at::zeros({B, C, N}, u.options());
    } else {
      const auto D_T = D.narrow(1, T - 1, 1);                                   // [B,1,C]
      const auto decay = ((D_T - D).unsqueeze(-1) * A).exp();                    // e^{A (D_T - D_i)} [B,T,C,N]
      out.final_state = at::einsum("btcn,btc,btn->bcn", {decay, delta * u, b});
      if (initial.defined()) out.final_state = out.final_state + (D_T.squeeze(1).unsqueeze(-1) * A).exp() * initial;
    }
  }
  return out;
}

}  // namespace seqmix::ops
