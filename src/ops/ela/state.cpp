// State handoff for causal ELA (include/seqmix/ops/ela.h, continue_ela_scan): the read continued from a state
// that already holds earlier positions, and the state after the last one, in closed form on top of a zero-start
// read by either impl. Derivation in README.md.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "internal.h"
#include "seqmix/ops/ela.h"

namespace seqmix::ops {
namespace {

void check_ela_state(const char* op, const ElaState& s, const at::Tensor& q, const at::Tensor& v,
                     const ExactKernel& kernel, int64_t features) {
  const bool exponential = kernel.exponential;
  const bool has_max = s.key_max.defined() && s.key_max.numel() > 0;
  TORCH_CHECK(s.kv.defined() == s.k_sum.defined(), op, ": give both kv and k_sum of the initial state, or neither");
  if (!s.kv.defined()) {
    TORCH_CHECK(!has_max, op, ": key_max was given without kv and k_sum");
    return;
  }
  const auto B = q.size(0), H = q.size(2), dk = q.size(3), dv = v.size(3);
  TORCH_CHECK(s.kv.sizes() == at::IntArrayRef({B, H, features, dv}), op, ": kernel '", kernel.name,
              "' needs the initial kv [B,H,F,dv] = [", B, ",", H, ",", features, ",", dv, "] (got ", s.kv.sizes(), ")");
  TORCH_CHECK(s.k_sum.sizes() == at::IntArrayRef({B, H, features}), op, ": kernel '", kernel.name,
              "' needs the initial k_sum [B,H,F] = [", B, ",", H, ",", features, "] (got ", s.k_sum.sizes(), ")");
  if (exponential) {
    TORCH_CHECK(has_max, op, ": kernel '", kernel.name, "' needs the initial state's key_max [B,H,dk]");
    TORCH_CHECK(s.key_max.sizes() == at::IntArrayRef({B, H, dk}), op, ": the initial key_max must be [B,H,dk] = [",
                B, ",", H, ",", dk, "] (got ", s.key_max.sizes(), ")");
  } else {
    TORCH_CHECK(!has_max, op, ": kernel '", kernel.name, "' keeps no key_max (give None or an empty tensor)");
  }
  for (const at::Tensor& t : {s.kv, s.k_sum, has_max ? s.key_max : s.kv})
    TORCH_CHECK(t.scalar_type() == q.scalar_type(), op, ": the initial state must have q's dtype ", q.scalar_type(),
                " (got ", t.scalar_type(), ")");
}

// Hadamard Exp: the read continued from (S, z) relative to the per-channel max r. With D0_t the zero-start row
// sum, log D0_t = logsumexp_d(q_td + logcumsumexp_{j<=t} k_jd), and the state's share
// A_t = sum_d e^{q_td + r_d} S_d, B_t = sum_d e^{q_td + r_d} z_d:  y_t = (D0_t y0_t + A_t) / (D0_t + B_t),
// every term scaled by e^{-s_t}, s_t = max(log D0_t, max_d(q_td + r_d)), so no exponent is positive.
at::Tensor continue_hadamard(const at::Tensor& y0, const at::Tensor& q, const at::Tensor& k, const ElaState& s) {
  const auto log_row_sum = at::logsumexp(q + at::logcumsumexp(k, 1), -1);  // [B,T,H]
  const auto shifted_q = q + s.key_max.unsqueeze(1);                        // [B,T,H,dk]
  at::Tensor shift;
  {
    at::NoGradGuard constant;  // y does not depend on the shift
    shift = at::maximum(log_row_sum, std::get<0>(shifted_q.max(-1))).detach();
  }
  const auto w = (shifted_q - shift.unsqueeze(-1)).exp();
  const auto here = (log_row_sum - shift).exp();  // D0 e^{-s}
  const auto numerator = here.unsqueeze(-1) * y0 + at::einsum("bthd,bhdv->bthv", {w, s.kv});
  const auto row_sum = here + at::einsum("bthd,bhd->bth", {w, s.k_sum});  // >= 1 where the max is attained
  return numerator / row_sum.unsqueeze(-1);
}

// A polynomial kernel: N0 = y0 max(D0, eps) with D0_t = phi_t . sum_{j<=t} psi_j, then
// y_t = (N0_t + phi_t S) / max(D0_t + phi_t . z, eps), the floor of the one long read.
at::Tensor continue_polynomial(const at::Tensor& y0, const at::Tensor& phi, const at::Tensor& psi,
                               const ExactKernel& kernel, const ElaState& s, double eps) {
  const auto row_sum0 = (phi * psi.cumsum(1)).sum(-1);  // [B,T,H]
  const auto numerator = y0 * row_sum0.clamp_min(eps).unsqueeze(-1) + at::einsum("bthf,bhfv->bthv", {phi, s.kv});
  const auto row_sum = row_sum0 + at::einsum("bthf,bhf->bth", {phi, s.k_sum});
  check_row_sums(kernel, row_sum);
  return numerator / row_sum.clamp_min(eps).unsqueeze(-1);
}

}  // namespace

ElaReadWithState continue_ela_scan(const at::Tensor& zero_state, const at::Tensor& q, const at::Tensor& k,
                                   const at::Tensor& v, const ExactKernel& kernel, double eps,
                                   const ElaState& initial, bool final_state) {
  const char* op = "ela";
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), dk = q.size(3), dv = v.size(3);
  const at::Tensor phi = kernel.exponential ? at::Tensor() : kernel.query_features(q);
  const at::Tensor psi = kernel.exponential ? at::Tensor() : kernel.key_features(k);
  const int64_t features = kernel.exponential ? dk : phi.size(-1);
  check_ela_state(op, initial, q, v, kernel, features);
  ElaReadWithState out{zero_state, {}};
  const bool from_state = initial.kv.defined();
  if (from_state)
    out.y = kernel.exponential ? continue_hadamard(zero_state, q, k, initial)
                               : continue_polynomial(zero_state, phi, psi, kernel, initial, eps);
  if (!final_state) return out;
  if (T == 0) {
    if (from_state) {
      out.final_state = initial;
    } else {
      const auto [kv, k_sum, key_max] = ela_initial_state_op(ElaInitialStateCall{
          .batch = B, .heads = H, .dk = dk, .dv = dv, .kernel = kernel.name, .dtype = q.scalar_type(), .device = q.device()});
      out.final_state = {kv, k_sum, kernel.exponential ? key_max : at::Tensor()};  // ElaState: undefined, not empty
    }
    return out;
  }
  if (kernel.exponential) {
    // The new per-channel max r' = max(r, max_j k_j); keys and the old state moved to it (exponents <= 0).
    const auto key_max = std::get<0>(k.max(1));  // [B,H,dk]
    const auto joint = from_state ? at::maximum(key_max, initial.key_max) : key_max;
    const auto weights = (k - joint.unsqueeze(1)).exp();  // [B,T,H,dk]
    auto kv = at::einsum("bthd,bthv->bhdv", {weights, v});
    auto k_sum = weights.sum(1);
    if (from_state) {
      const auto carried = (initial.key_max - joint).exp();  // [B,H,dk]
      kv = kv + carried.unsqueeze(-1) * initial.kv;
      k_sum = k_sum + carried * initial.k_sum;
    }
    out.final_state = {kv, k_sum, joint};
  } else {
    auto kv = at::einsum("bthf,bthv->bhfv", {psi, v});
    auto k_sum = psi.sum(1);
    if (from_state) {
      kv = kv + initial.kv;
      k_sum = k_sum + initial.k_sum;
    }
    out.final_state = {kv, k_sum, at::Tensor()};
  }
  return out;
}

}  // namespace seqmix::ops
