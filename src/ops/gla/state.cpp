// State handoff for linear attention and GLA (include/seqmix/ops/linear_attention.h, continue_decayed_scan): the
// initial state's contribution and the final state, in closed form on top of a zero-start read.
#include <ATen/ATen.h>

#include "../common/checks.h"
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
  // c [B,T,H]: the log decay from the state before position 1 to position t (none for linear attention).
  const at::Tensor c = log_decay.defined() ? log_decay.cumsum(1) : at::Tensor();
  if (initial.kv.defined()) {
    auto from_kv = at::einsum("bthk,bhkv->bthv", {q, initial.kv});
    auto from_k_sum = at::einsum("bthk,bhk->bth", {q, initial.k_sum});
    if (c.defined()) {
      from_kv = from_kv * c.exp().unsqueeze(-1);
      from_k_sum = from_k_sum * c.exp();
    }
    out.read.numerator = zero_state.numerator + from_kv;
    out.read.normaliser = zero_state.normaliser + from_k_sum;
  }
  if (final_state) {
    // Each position's key decayed to the end, e^{c_T - c_i} k_i [B,T,H,dk].
    const auto decayed_k = c.defined() && T > 0 ? k * (c.narrow(1, T - 1, 1) - c).exp().unsqueeze(-1) : k;
    auto kv = at::einsum("bthk,bthv->bhkv", {decayed_k, v});
    auto k_sum = decayed_k.sum(1);
    if (initial.kv.defined()) {
      const auto total = c.defined() && T > 0 ? c.select(1, T - 1).exp() : at::ones_like(k_sum.select(-1, 0));  // [B,H]
      kv = kv + total.unsqueeze(-1).unsqueeze(-1) * initial.kv;
      k_sum = k_sum + total.unsqueeze(-1) * initial.k_sum;
    }
    out.final_state = {kv, k_sum};
  }
  return out;
}

}  // namespace seqmix::ops
