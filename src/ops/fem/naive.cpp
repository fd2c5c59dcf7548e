// The free-energy read's value transform and restore, and the definitional softmax FEM read.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "../common/padding.h"
#include "seqmix/ops/attention.h"
#include "internal.h"
#include "seqmix/ops/fem.h"

namespace seqmix::ops {

FemScaleValuesCall::Result fem_scale_values_op(const FemScaleValuesCall& call) {
  const at::Tensor &v = call.v, &beta = call.beta;
  const double cap = call.cap;
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
  // Outputs are new tensors, as the schema says: with cap 0 the clipped values are a copy of v.
  at::Tensor clipped;
  if (cap > 0) {
    const auto limit = cap / b;
    clipped = at::maximum(at::minimum(v, limit), -limit);
  } else {
    clipped = v.clone();
  }
  return {clipped, clipped * b};
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
  const FemValues values =
      values_of(fem_scale_values_op(FemScaleValuesCall{in.v.flatten(2), beta.reshape({-1}), cap}));
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
