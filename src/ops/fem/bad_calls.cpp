// fem's calls with bad arguments (the op table's bad_calls): each must fail with one line naming the op or the
// argument. tests/ops/bad_shapes_test.cpp runs them.
#include <torch/torch.h>

#include <cmath>

#include "../common/bad_call_support.h"
#include "seqmix/ops/fem.h"

namespace seqmix::ops {
using namespace bad_call_support;

std::vector<BadCall> fem_bad_calls() {
  torch::manual_seed(6);
  const auto q = rnd({kB, kT, kH, kDk}), k = rnd({kB, kT, kH, kDk}), v = rnd({kB, kT, kH, kDv});
  const auto beta = positive({kH * kDv});
  const double cap = 5.0, scale = 0.5;
  std::vector<BadCall> cases;

  const std::string fs = "fem_scale_values";
  const auto v3 = rnd({kB, kT, kC}), beta_c = positive({kC});
  cases.push_back({fs + ": negative cap", [=] { ops::fem_scale_values(v3, beta_c, -1.0); }, fs});
  cases.push_back({fs + ": beta of another width", [=] { ops::fem_scale_values(v3, positive({kC + 1}), cap); }, fs});
  cases.push_back({fs + ": a zero beta", [=] { ops::fem_scale_values(v3, beta_c * torch::tensor({1.0, 0.0, 1.0}, kF64), cap); }, "beta must be > 0"});
  cases.push_back({fs + ": a NaN beta", [=] { ops::fem_scale_values(v3, beta_c * torch::tensor({1.0, std::nan(""), 1.0}, kF64), cap); }, "beta must be > 0"});
  cases.push_back({fs + ": v of rank 0", [=] { ops::fem_scale_values(torch::scalar_tensor(1.0, kF64), beta_c, cap); }, fs});

  const std::string fr = "fem_restore";
  const auto z = positive({kB, kT, kC}), shift = rnd({kB, kT, 1});
  cases.push_back({fr + ": beta of another width", [=] { ops::fem_restore(z, shift, positive({kC + 1})); }, fr});
  cases.push_back({fr + ": a negative beta", [=] { ops::fem_restore(z, shift, -beta_c); }, "beta must be > 0"});
  cases.push_back({fr + ": z of rank 0", [=] { ops::fem_restore(torch::scalar_tensor(1.0, kF64), shift, beta_c); }, fr});
  cases.push_back({fr + ": shift not broadcastable to z", [=] { ops::fem_restore(z, rnd({kB, kT, kC + 1}), beta_c); }, fr});

  const std::string fn = "fem_softmax_read_naive";
  cases.push_back({fn + ": q of rank 3", [=] { ops::fem_softmax_read_naive(q.flatten(2), k, v, beta, cap, true, scale); }, fn});
  cases.push_back({fn + ": beta with another entry count",
                   [=] { ops::fem_softmax_read_naive(q, k, v, positive({kH * kDv + 1}), cap, true, scale); }, fn});
  cases.push_back({fn + ": mixed dtypes",
                   [=] { ops::fem_softmax_read_naive(q, k, v, beta.to(torch::kFloat), cap, true, scale); }, fn});
  cases.push_back({fn + ": k with another batch size",
                   [=] { ops::fem_softmax_read_naive(q, rnd({kB + 1, kT, kH, kDk}), v, beta, cap, true, scale); }, fn});
  cases.push_back({fn + ": k with another head width",
                   [=] { ops::fem_softmax_read_naive(q, rnd({kB, kT, kH, kDk + 1}), v, beta, cap, true, scale); }, fn});
  cases.push_back({fn + ": v of another key length",
                   [=] { ops::fem_softmax_read_naive(q, k, rnd({kB, kT + 1, kH, kDv}), beta, cap, true, scale); }, fn});
  cases.push_back({fn + ": more queries than keys",
                   [=] { ops::fem_softmax_read_naive(rnd({kB, kT + 1, kH, kDk}), k, v, beta, cap, true, scale); }, fn});
  cases.push_back({fn + ": negative cap", [=] { ops::fem_softmax_read_naive(q, k, v, beta, -1.0, true, scale); }, "cap"});
  cases.push_back({fn + ": key_mask of another length",
                   [=] { ops::fem_softmax_read_naive(q, k, v, beta, cap, true, scale, all_true({kB, kT + 1})); }, "key_mask"});
  cases.push_back({fn + ": non-finite scale", [=] { ops::fem_softmax_read_naive(q, k, v, beta, cap, true, kNaN); }, "scale"});

  const std::string ff = "fem_softmax_read_fused";
  cases.push_back({ff + ": q of rank 3", [=] { ops::fem_softmax_read_fused(q.flatten(2), k, v, beta, cap, true, scale); }, ff});
  cases.push_back({ff + ": v of rank 3", [=] { ops::fem_softmax_read_fused(q, k, v.flatten(2), beta, cap, true, scale); }, ff});
  cases.push_back({ff + ": k with another head count",
                   [=] { ops::fem_softmax_read_fused(q, rnd({kB, kT, kH + 1, kDk}), v, beta, cap, true, scale); }, ff});
  cases.push_back({ff + ": beta with another entry count",
                   [=] { ops::fem_softmax_read_fused(q, k, v, positive({kH * kDv + 1}), cap, true, scale); }, ff});
  cases.push_back({ff + ": mixed dtypes",
                   [=] { ops::fem_softmax_read_fused(q, k, v, beta.to(torch::kFloat), cap, true, scale); }, ff});
  cases.push_back({ff + ": cap 0", [=] { ops::fem_softmax_read_fused(q, k, v, beta, 0.0, true, scale); }, "cap"});
  cases.push_back({ff + ": negative cap", [=] { ops::fem_softmax_read_fused(q, k, v, beta, -1.0, true, scale); }, "cap"});
  cases.push_back({ff + ": float32 cap above 40", [=] {
                     const auto f = torch::kFloat;
                     ops::fem_softmax_read_fused(q.to(f), k.to(f), v.to(f), beta.to(f), 41.0, true, scale);
                   }, "cap"});
  cases.push_back({ff + ": float64 cap above 43", [=] { ops::fem_softmax_read_fused(q, k, v, beta, 50.0, true, scale); }, "cap"});
  cases.push_back({ff + ": float key_mask",
                   [=] { ops::fem_softmax_read_fused(q, k, v, beta, cap, false, scale, torch::ones({kB, kT})); }, "key_mask"});
  cases.push_back({ff + ": non-finite scale", [=] { ops::fem_softmax_read_fused(q, k, v, beta, cap, true, kNaN); }, "scale"});

  return cases;
}

}  // namespace seqmix::ops
