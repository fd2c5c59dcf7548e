// gla's calls with bad arguments (the op table's bad_calls): each must fail with one line naming the op or the
// argument. tests/ops/bad_shapes_test.cpp runs them.
#include <torch/torch.h>

#include "../common/bad_call_support.h"
#include "seqmix/ops/gla.h"
#include "seqmix/ops/linear_attention.h"

namespace seqmix::ops {
using namespace bad_call_support;

std::vector<BadCall> gla_bad_calls() {
  torch::manual_seed(4);
  const auto q = rnd({kB, kT, kH, kDk}), k = rnd({kB, kT, kH, kDk}), v = rnd({kB, kT, kH, kDv});
  const auto a = -torch::softplus(rnd({kB, kT, kH}));
  std::vector<BadCall> cases;

  const std::string gn = "gla_naive";
  cases.push_back({gn + ": q of rank 3", [=] { ops::gla_naive(q.flatten(2), k, v, a); }, gn});
  cases.push_back({gn + ": log_decay [B,T,H,1] for keys of width dk", [=] { ops::gla_naive(q, k, v, a.unsqueeze(-1)); }, gn});
  cases.push_back({gn + ": log_decay of rank 5", [=] { ops::gla_naive(q, k, v, a.unsqueeze(-1).unsqueeze(-1)); }, gn});
  cases.push_back({gn + ": per-key log_decay with another key width", [=] {
                     ops::gla_naive(q, k, v, -positive({kB, kT, kH, kDk + 1}));
                   }, gn});
  cases.push_back({gn + ": log_decay with another head count", [=] { ops::gla_naive(q, k, v, -positive({kB, kT, kH + 1})); }, gn});
  cases.push_back({gn + ": log_decay missing", [=] { ops::gla_naive(q, k, v, torch::Tensor()); }, gn});
  cases.push_back({gn + ": v of another length", [=] { ops::gla_naive(q, k, rnd({kB, kT + 1, kH, kDv}), a); }, gn});
  cases.push_back({gn + ": mixed dtypes", [=] { ops::gla_naive(q, k, v, a.to(torch::kFloat)); }, gn});

  const std::string gs = "gla_step";
  const auto q_t = rnd({kB, kH, kDk}), k_t = rnd({kB, kH, kDk}), v_t = rnd({kB, kH, kDv});
  const auto a_t = -torch::softplus(rnd({kB, kH}));
  const auto fresh_state = [] { return ops::linear_attention_initial_state(kB, kH, kDk, kDv, {.dtype = torch::kDouble}); };
  cases.push_back({gs + ": log_decay_t [B,H,1] for keys of width dk", [=] {
                     auto state = fresh_state();
                     ops::gla_step(q_t, k_t, v_t, a_t.unsqueeze(-1), state.kv, state.k_sum);
                   }, gs});
  cases.push_back({gs + ": log_decay_t of rank 4", [=] {
                     auto state = fresh_state();
                     ops::gla_step(q_t, k_t, v_t, a_t.unsqueeze(-1).unsqueeze(-1), state.kv, state.k_sum);
                   }, gs});
  cases.push_back({gs + ": q_t of rank 2", [=] {
                     auto state = fresh_state();
                     ops::gla_step(q_t.flatten(1), k_t, v_t, a_t, state.kv, state.k_sum);
                   }, gs});
  cases.push_back({gs + ": log_decay_t with another head count", [=] {
                     auto state = fresh_state();
                     ops::gla_step(q_t, k_t, v_t, -positive({kB, kH + 1}), state.kv, state.k_sum);
                   }, gs});
  cases.push_back({gs + ": k_t with another batch size", [=] {
                     auto state = fresh_state();
                     ops::gla_step(q_t, rnd({kB + 1, kH, kDk}), v_t, a_t, state.kv, state.k_sum);
                   }, gs});
  cases.push_back({gs + ": state.kv of rank 3", [=] {
                     auto state = fresh_state();
                     state.kv = torch::zeros({kB, kH, kDk * kDv}, kF64);
                     ops::gla_step(q_t, k_t, v_t, a_t, state.kv, state.k_sum);
                   }, gs});
  cases.push_back({gs + ": state of another key width than q_t and k_t", [=] {
                     auto state = fresh_state();
                     ops::gla_step(rnd({kB, kH, kDk + 1}), rnd({kB, kH, kDk + 1}), v_t, a_t, state.kv, state.k_sum);
                   }, "key features"});
  cases.push_back({gs + ": state of batch size 1 for a batch of 2", [=] {
                     auto state = ops::linear_attention_initial_state(1, kH, kDk, kDv, {.dtype = torch::kDouble});
                     ops::gla_step(q_t, k_t, v_t, a_t, state.kv, state.k_sum);
                   }, gs});

  const std::string gf = "gla_fused";
  cases.push_back({gf + ": q of rank 3", [=] { ops::gla_fused(q.flatten(2), k, v, a); }, gf});
  cases.push_back({gf + ": k with another head width", [=] { ops::gla_fused(q, rnd({kB, kT, kH, kDk + 1}), v, a); }, gf});
  cases.push_back({gf + ": log_decay with another head count", [=] { ops::gla_fused(q, k, v, -positive({kB, kT, kH + 1})); }, gf});
  cases.push_back({gf + ": log_decay missing", [=] { ops::gla_fused(q, k, v, torch::Tensor()); }, gf});
  cases.push_back({gf + ": per-key log_decay with another head count", [=] {
                     ops::gla_fused(q, k, v, -positive({kB, kT, kH + 1, kDk}));
                   }, gf});
  cases.push_back({gf + ": mixed dtypes", [=] { ops::gla_fused(q, k, v, a.to(torch::kFloat)); }, gf});
  cases.push_back({gf + ": float16", [=] {
                     const auto h = torch::kHalf;
                     ops::gla_fused(q.to(h), k.to(h), v.to(h), a.to(h));
                   }, gf});

  return cases;
}

}  // namespace seqmix::ops
