// The blocked HyperMLP read: query rows in blocks; each block's scores against its causal prefix are laid
// out so that every row's parameter slots line up in columns, and the DPLR mixers become two GEMMs with
// one slice of U and Vt shared by the block. See README.md for the layouts.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "activation.h"
#include "seqmix/ops/hypermlp.h"

namespace seqmix::ops {
namespace {

std::vector<int64_t> with_last_two(at::IntArrayRef lead, int64_t a, int64_t b) {
  std::vector<int64_t> s(lead.begin(), lead.end());
  s.push_back(a);
  s.push_back(b);
  return s;
}

// s [...,M,n] in key order (column c = key position, the M rows are the last M positions of n) ->
// lag layout [...,M,n]: column tau holds lag n-1-tau, so row m's visible slots are the right-aligned
// tau >= M-1-m and column tau uses parameter row Lmax - n + tau for every row. Row m is shifted right by
// M-1-m: pad M-1 zeros on the left (row width W = n+M-1), then re-read the flat buffer with row stride W+1.
at::Tensor to_lag_layout(const at::Tensor& s) {
  const int64_t M = s.size(-2), n = s.size(-1);
  if (M == 1) return s;
  const auto lead = s.sizes().slice(0, s.dim() - 2);
  const int64_t W = n + M - 1;
  std::vector<int64_t> flat_shape(lead.begin(), lead.end());
  flat_shape.push_back(M * W);
  auto flat = at::constant_pad_nd(at::constant_pad_nd(s, {M - 1, 0}).reshape(flat_shape), {0, M});
  return flat.view(with_last_two(lead, M, W + 1)).narrow(-1, 0, n);
}

// The inverse: lag layout [...,M,n] -> key order, row m shifted left by M-1-m (zeros past the diagonal).
at::Tensor to_key_order(const at::Tensor& x) {
  const int64_t M = x.size(-2), n = x.size(-1);
  if (M == 1) return x;
  const auto lead = x.sizes().slice(0, x.dim() - 2);
  const int64_t W = n + M - 1;
  std::vector<int64_t> flat_shape(lead.begin(), lead.end());
  flat_shape.push_back(M * W);
  auto flat = at::constant_pad_nd(x, {0, M - 1}).reshape(flat_shape).narrow(-1, M - 1, M * (W - 1));
  return flat.reshape(with_last_two(lead, M, W - 1)).narrow(-1, 0, n);
}

// [M,n] bool: the slots row m may see (its keys up to its own position) in the block's layout.
at::Tensor visible_slots(int64_t M, int64_t n, HyperLayout layout, const at::TensorOptions& options) {
  auto row = at::arange(M, options.dtype(at::kLong)).unsqueeze(1);
  auto col = at::arange(n, options.dtype(at::kLong)).unsqueeze(0);
  return layout == HyperLayout::lag ? (col + row >= M - 1) : (col <= row + (n - M));
}

// y [B,Hm,M,n] (zero on hidden slots) -> y R on the slots whose parameter rows are first .. first+n-1:
// y * (1 + p) + ((y U) * s) Vt, hidden slots zeroed again (the low-rank part spreads into them).
at::Tensor mix(const at::Tensor& y, const at::Tensor& s, const HyperMixing& m, int64_t first,
               const at::Tensor& visible) {
  const int64_t n = y.size(-1);
  auto U = m.U.narrow(1, first, n);                      // [Hm,n,r]
  auto Vt = m.Vt.narrow(2, first, n);                    // [Hm,r,n]
  auto diag = m.diag.narrow(1, first, n).unsqueeze(1);   // [Hm,1,n]
  auto low_rank = at::matmul(at::matmul(y, U) * s, Vt);  // [B,Hm,M,n]
  return (low_rank + y * (diag + 1)) * visible;
}

}  // namespace

at::Tensor hypermlp_read_blocked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& s1, const HyperMixing& mix1, const at::Tensor& s2,
                                 const HyperMixing& mix2, const HyperReadOptions& options) {
  check_hypermlp_args("hypermlp_read_blocked", q, k, v, s1, mix1, s2, mix2, options);
  const int64_t T = q.size(1), S = k.size(1);
  const bool lag = options.layout == HyperLayout::lag;
  auto qh = q.transpose(1, 2), kh = k.transpose(1, 2), vh = v.transpose(1, 2);  // [B,heads,len,d]
  auto s1h = s1.defined() ? s1.transpose(1, 2) : s1, s2h = s2.defined() ? s2.transpose(1, 2) : s2;
  const int64_t block = options.block > 0 ? options.block : T;
  std::vector<at::Tensor> outs;
  for (int64_t i0 = 0; i0 < T; i0 += block) {
    const int64_t M = std::min(block, T - i0);
    const int64_t n = S - T + i0 + M;  // the block's causal prefix: keys 0 .. n-1
    auto visible = visible_slots(M, n, options.layout, q.options());
    auto vis = visible.to(q.scalar_type());
    auto scores = at::matmul(qh.narrow(2, i0, M), kh.narrow(2, 0, n).transpose(-1, -2));  // [B,Hq,M,n]
    if (options.scale != 1.0) scores = scores * options.scale;
    auto h = lag ? to_lag_layout(scores) : scores * vis;
    // Lag layout: column tau is lag n-1-tau, parameter row Lmax-1-lag = Lmax-n+tau. Forward: row = column.
    if (mix1.defined()) h = mix(h, s1h.narrow(2, i0, M), mix1, lag ? mix1.max_len() - n : 0, vis);
    auto act = hypermlp::activate(h, visible, options);
    auto w = act.a;
    if (mix2.defined()) w = mix(w, s2h.narrow(2, i0, M), mix2, lag ? mix2.max_len() - n : 0, vis);
    if (lag) w = to_key_order(w);
    auto out = at::matmul(w, vh.narrow(2, 0, n));  // [B,H,M,dvo]
    outs.push_back(act.inv.defined() ? out * act.inv : out);
  }
  return at::cat(outs, 2).transpose(1, 2);
}

}  // namespace seqmix::ops
