// State handoff for the delta rule (internal.h, delta_rule_from_state): a zero-start read of
// corrected values, plus d_k read-only positions that read the final state out.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "../common/padding.h"
#include "seqmix/ops/delta.h"
#include "seqmix/ops/linear_attention.h"
#include "internal.h"

namespace seqmix::ops {

namespace {

// The read from a zero state: the parallel form (the only one) through causal_outputs.
PriorRead zero_start_read(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta) {
  const auto r = causal_outputs(true, {k, v, beta}, q, {}, [&](const Window& w) {
    const PriorRead read = delta_rule_naive(w.queries(q, k), w.keys(k), w.keys(v), w.keys(beta));
    return std::vector<at::Tensor>{read.numerator, read.normaliser};
  });
  return {r[0], r[1]};
}

}  // namespace

ReadAndState delta_rule_from_state(const DeltaRuleCall& call) {
  const at::Tensor q = scaled(call.q, call.scale), &k = call.k, &v = call.v, &beta = call.beta;
  const LinearAttentionState initial{or_undefined(call.kv), or_undefined(call.k_sum)};
  const bool final_state = call.output_final_state;
  check_impl(impl_of(call.impl), kDeltaRuleImpls, "delta_rule", q.device());
  const bool from_state = initial.kv.defined() || initial.k_sum.defined();
  if (!from_state && !final_state) {
    const PriorRead read = zero_start_read(q, k, v, beta);
    return {read.numerator, read.normaliser, at::Tensor(), at::Tensor()};
  }
  check_rank(q, "delta_rule", "q", 4, "B,T,H,dk");
  check_rank(v, "delta_rule", "v", 4, "B,T,H,dv");
  check_initial_state("delta_rule", initial, q, v);
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), dk = q.size(3), dv = v.size(3);
  // Values and the normaliser's ones, corrected by what S_0 and z_0 already return for each key: [B,T,H,dv+1].
  at::Tensor values = v, ones = at::ones({B, T, H, 1}, v.options());
  if (from_state) {
    values = v - at::einsum("bthk,bhkv->bthv", {k, initial.kv});
    ones = ones - at::einsum("bthk,bhk->bth", {k, initial.k_sum}).unsqueeze(-1);
  }
  at::Tensor qs = q, ks = k, bs = beta, vs = at::cat({values, ones}, -1);
  if (final_state) {
    // d_k positions after T that read without writing (b = 0, k = 0): query e_i reads row i of S_T - S_0.
    qs = at::cat({q, at::eye(dk, q.options()).view({1, dk, 1, dk}).expand({B, dk, H, dk})}, 1);
    ks = at::cat({k, at::zeros({B, dk, H, dk}, k.options())}, 1);
    bs = at::cat({beta, at::zeros({B, dk, H}, beta.options())}, 1);
    vs = at::cat({vs, at::zeros({B, dk, H, dv + 1}, vs.options())}, 1);
  }
  const at::Tensor read = zero_start_read(qs, ks, vs, bs).numerator;  // [B,T(+dk),H,dv+1]
  const at::Tensor positions = read.narrow(1, 0, T);
  ReadWithState out;
  out.read.numerator = positions.narrow(-1, 0, dv);
  out.read.normaliser = positions.select(-1, dv);
  if (from_state) {
    out.read.numerator = out.read.numerator + at::einsum("bthk,bhkv->bthv", {q, initial.kv});
    out.read.normaliser = out.read.normaliser + at::einsum("bthk,bhk->bth", {q, initial.k_sum});
  }
  if (final_state) {
    const at::Tensor rows = read.narrow(1, T, dk).permute({0, 2, 1, 3});  // [B,H,dk,dv+1]
    out.final_state.kv = rows.narrow(-1, 0, dv);
    out.final_state.k_sum = rows.select(-1, dv);
    if (from_state) {
      out.final_state.kv = out.final_state.kv + initial.kv;
      out.final_state.k_sum = out.final_state.k_sum + initial.k_sum;
    }
  }
  return {out.read.numerator, out.read.normaliser, out.final_state.kv, out.final_state.k_sum};
}

}  // namespace seqmix::ops
