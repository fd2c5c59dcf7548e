// delta's calls with bad arguments (the op table's bad_calls): each must fail with one line naming the op or the
// argument. tests/ops/bad_shapes_test.cpp runs them.
#include <torch/torch.h>

#include "../common/bad_call_support.h"
#include "seqmix/ops/delta.h"

namespace seqmix::ops {
using namespace bad_call_support;

std::vector<BadCall> delta_bad_calls() {
  torch::manual_seed(9);
  const auto q = rnd({kB, kT, kH, kDk}), k = rnd({kB, kT, kH, kDk}), v = rnd({kB, kT, kH, kDv});
  const auto b = torch::sigmoid(rnd({kB, kT, kH}));
  std::vector<BadCall> cases;

  const std::string dn = "delta_rule_naive";
  cases.push_back({dn + ": q of rank 3", [=] { ops::delta_rule_naive(q.flatten(2), k, v, b); }, dn});
  cases.push_back({dn + ": k with another head width", [=] { ops::delta_rule_naive(q, rnd({kB, kT, kH, kDk + 1}), v, b); }, dn});
  cases.push_back({dn + ": v of another length", [=] { ops::delta_rule_naive(q, k, rnd({kB, kT + 1, kH, kDv}), b); }, dn});
  cases.push_back({dn + ": beta missing", [=] { ops::delta_rule_naive(q, k, v, torch::Tensor()); }, "beta"});
  cases.push_back({dn + ": beta of rank 4", [=] { ops::delta_rule_naive(q, k, v, b.unsqueeze(-1)); }, "beta"});
  cases.push_back({dn + ": beta with another head count", [=] { ops::delta_rule_naive(q, k, v, rnd({kB, kT, kH + 1})); }, "beta"});
  cases.push_back({dn + ": mixed dtypes", [=] { ops::delta_rule_naive(q, k, v, b.to(torch::kFloat)); }, dn});

  const std::string de = "delta_rule";
  cases.push_back({de + ": impl fused (it has naive only)",
                   [=] { ops::delta_rule(q, k, v, b, {.impl = ops::Impl::fused}); }, "naive"});

  const std::string ds = "delta_rule_step";
  const auto q_t = rnd({kB, kH, kDk}), k_t = rnd({kB, kH, kDk}), v_t = rnd({kB, kH, kDv});
  const auto b_t = torch::sigmoid(rnd({kB, kH}));
  const auto fresh_state = [] { return ops::linear_attention_initial_state(kB, kH, kDk, kDv, {.dtype = torch::kDouble}); };
  cases.push_back({ds + ": q_t of rank 4", [=] {
                     auto state = fresh_state();
                     ops::delta_rule_step(q_t.unsqueeze(1), k_t, v_t, b_t, state.kv, state.k_sum);
                   }, ds});
  cases.push_back({ds + ": beta_t of rank 3", [=] {
                     auto state = fresh_state();
                     ops::delta_rule_step(q_t, k_t, v_t, b_t.unsqueeze(-1), state.kv, state.k_sum);
                   }, "beta_t"});
  cases.push_back({ds + ": beta_t missing", [=] {
                     auto state = fresh_state();
                     ops::delta_rule_step(q_t, k_t, v_t, torch::Tensor(), state.kv, state.k_sum);
                   }, "beta_t"});
  cases.push_back({ds + ": state of another key width", [=] {
                     auto state = ops::linear_attention_initial_state(kB, kH, kDk + 1, kDv, {.dtype = torch::kDouble});
                     ops::delta_rule_step(q_t, k_t, v_t, b_t, state.kv, state.k_sum);
                   }, ds});
  cases.push_back({ds + ": state of another dtype", [=] {
                     auto state = ops::linear_attention_initial_state(kB, kH, kDk, kDv, {.dtype = torch::kFloat});
                     ops::delta_rule_step(q_t, k_t, v_t, b_t, state.kv, state.k_sum);
                   }, ds});
  return cases;
}

}  // namespace seqmix::ops
