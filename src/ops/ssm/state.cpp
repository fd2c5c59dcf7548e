// The selective scan's operator, seqmix::ssm_scan (internal.h): the chosen implementation from a zero state, and
// the state handoff, the initial state's contribution and the final state in closed form on top of it.
#include <ATen/ATen.h>

#include <vector>

#include "../common/checks.h"
#include "../common/packing.h"
#include "internal.h"

namespace seqmix::ops {

namespace {

struct ScanWithState {
  at::Tensor y;
  at::Tensor final_state;
};

// The closed form of one sequence (or of every row of an unpacked batch) on top of its zero-start scan y.
ScanWithState continue_scan(const at::Tensor& y, const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A,
                            const at::Tensor& b, const at::Tensor& c, const at::Tensor& initial, bool final_state) {
  ScanWithState out{y, {}};
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

}  // namespace

SsmScanCall::Result ssm_scan_op(const SsmScanCall& call) {
  const at::Tensor &u = call.u, &delta = call.delta, &A = call.A, &b = call.b, &c = call.c;
  const at::Tensor initial = or_undefined(call.state), cu_seqlens = or_undefined(call.cu_seqlens);
  const bool final_state = call.output_final_state;
  const at::Tensor y = check_impl(impl_of(call.impl), kSsmScanImpls, "ssm_scan", u.device()) == Impl::fused
                           ? ssm_scan_fused(u, delta, A, b, c, cu_seqlens)
                           : ssm_scan_naive(u, delta, A, b, c, cu_seqlens);
  if (!cu_seqlens.defined()) {
    const ScanWithState r = continue_scan(y, u, delta, A, b, c, initial, final_state);
    return {r.y, r.final_state};
  }
  if (!initial.defined() && !final_state) return {y, {}};
  // Packed: each sequence's slice continued from its own row of the initial state, [N,C,N_state].
  const int64_t sequences = cu_seqlens.numel() - 1;
  TORCH_CHECK(!initial.defined() || (initial.dim() == 3 && initial.size(0) == sequences), "ssm_scan: packed, the ",
              "initial states must be one per sequence, [N,C,N_state] with N = ", sequences, " (got ", initial.sizes(),
              ")");
  std::vector<at::Tensor> ys, finals;
  for (const Segment& s : sequence_segments(cu_seqlens, u.size(1))) {
    const int64_t index = static_cast<int64_t>(ys.size());
    const auto part = [&](const at::Tensor& x) { return x.narrow(1, s.begin, s.end - s.begin); };
    const ScanWithState r = continue_scan(part(y), part(u), part(delta), A, part(b), part(c),
                                          initial.defined() ? initial.narrow(0, index, 1) : at::Tensor(), final_state);
    ys.push_back(r.y);
    if (final_state) finals.push_back(r.final_state);
  }
  return {at::cat(ys, 1), final_state ? at::cat(finals, 0) : at::Tensor()};
}

}  // namespace seqmix::ops
