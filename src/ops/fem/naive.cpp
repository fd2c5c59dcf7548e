// The free-energy read's value transform and restore, and the definitional softmax FEM read.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include "../common/checks.h"
#include "../common/padding.h"
#include "seqmix/ops/attention.h"
#include "seqmix/ops/fem.h"

namespace seqmix::ops {

FemValues native::fem_scale_values(const at::Tensor& v, const at::Tensor& beta, double cap) {
  TORCH_CHECK(cap >= 0, "fem_scale_values: cap must be >= 0 (got ", cap, ")");
  TORCH_CHECK(v.defined() && v.dim() >= 1, "fem_scale_values: v must have a channel axis [...,C] (got ",
              v.defined() ? "a scalar" : "none", ")");
  TORCH_CHECK(beta.defined(), "fem_scale_values: beta is missing (expected one entry per value channel)");
  // Sizes as SymInts: the Meta kernel runs this code under torch.compile with symbolic shapes.
  TORCH_SYM_CHECK(beta.sym_numel().sym_eq(v.sym_size(-1)),
                  "fem_scale_values: beta must have one entry per value channel (got ", beta.sym_numel(), " for ",
                  v.sym_size(-1), " channels)");
  check_positive("fem_scale_values", "beta", beta);
  const auto b = beta.reshape_symint({v.sym_size(-1)});
  at::Tensor clipped = v;
  if (cap > 0) {
    const auto limit = cap / b;
    clipped = at::maximum(at::minimum(v, limit), -limit);
  }
  return {clipped, clipped * b};
}

at::Tensor native::fem_restore(const at::Tensor& z, const at::Tensor& shift, const at::Tensor& beta) {
  const char* op = "fem_restore";
  TORCH_CHECK(z.defined() && z.dim() >= 1, op, ": z must have a channel axis [...,C] (got ",
              z.defined() ? "a scalar" : "none", ")");
  TORCH_CHECK(beta.defined(), op, ": beta is missing (expected one entry per channel)");
  TORCH_SYM_CHECK(beta.sym_numel().sym_eq(z.sym_size(-1)), op, ": beta must have one entry per channel (got ",
                  beta.sym_numel(), " for ", z.sym_size(-1), " channels)");
  TORCH_CHECK(shift.defined() && at::is_expandable_to(shift.sym_sizes(), z.sym_sizes()), op,
              ": shift must broadcast to z ", z.sym_sizes(), " (got ", shift.defined() ? shift.sym_sizes() : c10::SymIntArrayRef{},
              ")");
  check_positive(op, "beta", beta);
  return (z.log() + shift) / beta.reshape_symint({z.sym_size(-1)});
}

FemRead fem_softmax_read_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                               double cap, bool causal, double scale, const at::Tensor& key_mask) {
  const char* op = "fem_softmax_read_naive";
  check_attention_args(op, q, k, v);
  TORCH_CHECK(beta.defined(), op, ": beta is missing (expected H*dv = ", v.size(2) * v.size(3), " entries)");
  check_same_float_dtype(op, {q, beta});
  TORCH_CHECK(cap >= 0, op, ": cap must be >= 0 (got ", cap, ")");
  check_key_mask(op, key_mask, k.size(0), k.size(1));
  check_scale(op, scale);
  TORCH_SYM_CHECK(beta.sym_numel().sym_eq(v.sym_size(2) * v.sym_size(3)), op, ": beta must have H*dv = ",
                  v.sym_size(2) * v.sym_size(3), " entries (got ", beta.sym_numel(), ")");
  const auto b = beta.reshape_symint({v.sym_size(2), v.sym_size(3)});
  const AttentionInputs in = finite_masked_positions(op, q, k, v, key_mask);
  const auto values = native::fem_scale_values(in.v.flatten(2), beta.reshape({-1}), cap);
  const auto vc = values.clipped.view(v.sizes()), u = values.scaled.view(v.sizes());
  auto scores = at::matmul(in.q.transpose(1, 2), in.k.permute({0, 2, 3, 1})) * scale;  // [B,H,T,S]
  const auto visible = visible_keys(q.size(1), k.size(1), causal, key_mask, q.device());
  if (visible.defined()) scores = scores.masked_fill(visible.logical_not(), -std::numeric_limits<double>::infinity());
  const auto log_p = at::log_softmax(scores, -1);
  FemRead r;
  r.mean = at::matmul(log_p.exp(), vc.transpose(1, 2)).transpose(1, 2);
  // logsumexp over keys of log p_ti + u_ic: [B,H,T,S,1] + [B,H,1,S,dv] -> [B,H,T,dv]
  const auto lse = at::logsumexp(log_p.unsqueeze(-1) + u.transpose(1, 2).unsqueeze(2), {3});
  r.free_energy = (lse / b.unsqueeze(1)).transpose(1, 2);
  return r;
}

}  // namespace seqmix::ops
