// State handoff for linear attention and GLA (include/seqmix/ops/linear_attention.h, continue_decayed_scan): the
// initial state's contribution and the final state, in closed form on top of a zero-start read.
#include <ATen/ATen.h>

#include <vector>

#include "../common/checks.h"
#include "../common/packing.h"
#include "seqmix/ops/linear_attention.h"

namespace seqmix::ops {

void check_initial_state(const char* op, const LinearAttentionState& s, const at::Tensor& q, const at::Tensor& v) {
  TORCH_CHECK(s.kv.defined() == s.k_sum.defined(), op, ": give both kv and k_sum of the initial state, or neither");
  if (!s.kv.defined()) return;
  const auto B = q.size(0), H = q.size(2), dk = q.size(3), dv = v.size(3);
  TORCH_CHECK(s.kv.sizes() == at::IntArrayRef({B, H, dk, dv}), op, ": the initial kv must be [B,H,dk,dv] = [", B, ",",
              H, ",", dk, ",", dv, "] (got ", s.kv.sizes(), ")");
  TORCH_CHECK(s.k_sum.sizes() == at::IntArrayRef({B, H, dk}), op, ": the initial k_sum must be [B,H,dk] = [", B, ",",
              H, ",", dk, "] (got ", s.k_sum.sizes(), ")");
  TORCH_CHECK(s.kv.scalar_type() == q.scalar_type() && s.k_sum.scalar_type() == q.scalar_type(), op,
              ": the initial state must have q's dtype ", q.scalar_type(), " (got ", s.kv.scalar_type(), " and ",
              s.k_sum.scalar_type(), ")");
}

ReadWithState continue_decayed_scan(const PriorRead& zero_state, const at::Tensor& q, const at::Tensor& k,
                                    const at::Tensor& v, const at::Tensor& log_decay,
                                    const LinearAttentionState& initial, bool final_state) {
  const char* op = log_decay.defined() ? "gla" : "linear_attention";
  check_initial_state(op, initial, q, v);
  ReadWithState out{zero_state, {}};
  if (!initial.kv.defined() && !final_state) return out;
  const int64_t T = q.size(1);
  // c [B,T,H,dk] or [B,T,H,1]: the log decay from the state before position 1 to position t, per key feature
  // (a per-head decay broadcast over them); none for linear attention.
  const at::Tensor c = !log_decay.defined()   ? at::Tensor()
                       : log_decay.dim() == 4 ? log_decay.cumsum(1)
                                              : log_decay.cumsum(1).unsqueeze(-1);
  if (initial.kv.defined()) {
    // Each query sees the initial state through the decay since the start: (q_t ⊙ e^{c_t}) S_0.
    const auto decayed_q = c.defined() ? q * c.exp() : q;
    out.read.numerator = zero_state.numerator + at::einsum("bthk,bhkv->bthv", {decayed_q, initial.kv});
    out.read.normaliser = zero_state.normaliser + at::einsum("bthk,bhk->bth", {decayed_q, initial.k_sum});
  }
  if (final_state) {
    // Each position's key decayed to the end, e^{c_T - c_i} ⊙ k_i [B,T,H,dk].
    const auto decayed_k = c.defined() && T > 0 ? k * (c.narrow(1, T - 1, 1) - c).exp() : k;
    auto kv = at::einsum("bthk,bthv->bhkv", {decayed_k, v});
    auto k_sum = decayed_k.sum(1);
    if (initial.kv.defined()) {
      // e^{c_T} per row of the state [B,H,dk] (or [B,H,1]); 1 without decay or positions.
      const auto total = c.defined() && T > 0 ? c.select(1, T - 1).exp() : at::ones_like(k_sum.narrow(-1, 0, 1));
      kv = kv + total.unsqueeze(-1) * initial.kv;
      k_sum = k_sum + total * initial.k_sum;
    }
    out.final_state = {kv, k_sum};
  }
  return out;
}

ReadWithState continue_packed_scan(const PriorRead& zero_state, const at::Tensor& q, const at::Tensor& k,
                                   const at::Tensor& v, const at::Tensor& log_decay,
                                   const LinearAttentionState& initial, bool final_state,
                                   const at::Tensor& cu_seqlens) {
  if (!cu_seqlens.defined()) return continue_decayed_scan(zero_state, q, k, v, log_decay, initial, final_state);
  ReadWithState out{zero_state, {}};
  if (!initial.kv.defined() && !final_state) return out;
  const char* op = log_decay.defined() ? "gla" : "linear_attention";
  check_cu_seqlens(op, cu_seqlens, q.size(0), q.size(1));
  const int64_t sequences = cu_seqlens.numel() - 1;
  TORCH_CHECK(!initial.kv.defined() || (initial.kv.dim() == 4 && initial.kv.size(0) == sequences), op, ": packed, ",
              "the initial states must be one per sequence, kv [N,H,dk,dv] with N = ", sequences, " (got ",
              initial.kv.sizes(), ")");
  const auto cu = host_offsets(cu_seqlens);
  const int64_t* bounds = cu.data_ptr<int64_t>();
  std::vector<at::Tensor> numerators, normalisers, kvs, k_sums;
  for (int64_t s = 0; s < sequences; ++s) {
    const auto part = [&](const at::Tensor& x) {
      return x.defined() ? x.narrow(1, bounds[s], bounds[s + 1] - bounds[s]) : x;
    };
    const auto one = [&](const at::Tensor& x) { return x.defined() ? x.narrow(0, s, 1) : x; };
    const ReadWithState r = continue_decayed_scan({part(zero_state.numerator), part(zero_state.normaliser)}, part(q),
                                                  part(k), part(v), part(log_decay),
                                                  {one(initial.kv), one(initial.k_sum)}, final_state);
    numerators.push_back(r.read.numerator);
    normalisers.push_back(r.read.normaliser);
    if (final_state) {
      kvs.push_back(r.final_state.kv);
      k_sums.push_back(r.final_state.k_sum);
    }
  }
  out.read = {at::cat(numerators, 1), at::cat(normalisers, 1)};
  if (final_state) out.final_state = {at::cat(kvs, 0), at::cat(k_sums, 0)};
  return out;
}

}  // namespace seqmix::ops
