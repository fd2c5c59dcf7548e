// The naive twin of the blocked HyperMLP read: the paper's formula one query row at a time, in lag order
// (newest key first), with that row's sequence mixers R1 and R2 materialised as (n x n) matrices.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "activation.h"
#include "seqmix/ops/hypermlp.h"

namespace seqmix::ops {
namespace {

// The row's mixer on its n slots: Diag(1 + p[P]) + U[P] Diag(s) Vt[:, P] -> [B,Hm,n,n]; s [B,Hm,r].
at::Tensor materialise(const HyperMixing& m, const at::Tensor& s, const at::Tensor& rows) {
  auto diagonal = at::diag_embed(m.diag.index_select(1, rows) + 1);  // [Hm,n,n]
  auto A = m.U.index_select(1, rows);                                // [Hm,n,r]
  auto Bt = m.Vt.index_select(2, rows);                              // [Hm,r,n]
  return diagonal + at::matmul(A * s.unsqueeze(2), Bt);
}

}  // namespace

at::Tensor hypermlp_read_dense(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const at::Tensor& s1, const HyperMixing& mix1, const at::Tensor& s2,
                               const HyperMixing& mix2, const HyperReadOptions& options) {
  check_hypermlp_args("hypermlp_read_dense", q, k, v, s1, mix1, s2, mix2, options);
  const int64_t T = q.size(1), S = k.size(1);
  std::vector<at::Tensor> outs;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t position = S - T + t, n = position + 1;
    auto lag = at::arange(n, q.options().dtype(at::kLong));   // slot l = lag l
    auto key_of_slot = position - lag;                          // the key at lag l
    auto k_lag = k.index_select(1, key_of_slot).transpose(1, 2);  // [B,Hq,n,dqk], newest first
    auto v_lag = v.index_select(1, key_of_slot).transpose(1, 2);  // [B,H,n,dvo]
    auto z = at::matmul(k_lag, q.select(1, t).unsqueeze(-1)).squeeze(-1) * options.scale;  // [B,Hq,n]
    auto h = z;
    if (mix1.defined()) {
      auto rows = options.layout == HyperLayout::lag ? mix1.max_len() - 1 - lag : key_of_slot;
      h = at::matmul(z.unsqueeze(2), materialise(mix1, s1.select(1, t), rows)).squeeze(2);
    }
    auto act = hypermlp::activate(h, at::ones({n}, lag.options().dtype(at::kBool)), options);
    auto w = act.a;
    if (mix2.defined()) {
      auto rows = options.layout == HyperLayout::lag ? mix2.max_len() - 1 - lag : key_of_slot;
      w = at::matmul(w.unsqueeze(2), materialise(mix2, s2.select(1, t), rows)).squeeze(2);
    }
    auto out = at::matmul(w.unsqueeze(2), v_lag).squeeze(2);  // [B,H,dvo]
    outs.push_back(act.inv.defined() ? out * act.inv : out);
  }
  return at::stack(outs, 1);
}

}  // namespace seqmix::ops
