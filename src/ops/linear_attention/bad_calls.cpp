// linear_attention's calls with bad arguments (the op table's bad_calls): each must fail with one line naming the op or the
// argument. tests/ops/bad_shapes_test.cpp runs them.
#include <torch/torch.h>

#include "../common/bad_call_support.h"
#include "seqmix/ops/linear_attention.h"

namespace seqmix::ops {
using namespace bad_call_support;

std::vector<BadCall> linear_attention_bad_calls() {
  torch::manual_seed(3);
  const auto q = rnd({kB, kT, kH, kDk}), k = rnd({kB, kT, kH, kDk}), v = rnd({kB, kT, kH, kDv});
  std::vector<BadCall> cases;

  const std::string ln = "linear_attention_naive";
  cases.push_back({"linear_attention_step: a float32 state for float64 inputs", [=] {
                     auto state = ops::linear_attention_initial_state(kB, kH, kDk, kDv, {.dtype = torch::kFloat});
                     ops::linear_attention_step(rnd({kB, kH, kDk}), rnd({kB, kH, kDk}), rnd({kB, kH, kDv}), state.kv,
                                                state.k_sum);
                   }, "the decode state is Float but the inputs are Double"});
  cases.push_back({ln + ": q of rank 3", [=] { ops::linear_attention_naive(q.flatten(2), k, v, true); }, ln});
  cases.push_back({ln + ": k with another head width", [=] { ops::linear_attention_naive(q, rnd({kB, kT, kH, kDk + 1}), v, true); }, ln});
  cases.push_back({ln + ": k with another batch size", [=] { ops::linear_attention_naive(q, rnd({kB + 1, kT, kH, kDk}), v, false); }, ln});
  cases.push_back({ln + ": v of another length", [=] { ops::linear_attention_naive(q, k, rnd({kB, kT + 1, kH, kDv}), true); }, ln});
  cases.push_back({ln + ": v with another head count", [=] { ops::linear_attention_naive(q, k, rnd({kB, kT, kH + 1, kDv}), false); }, ln});
  cases.push_back({ln + ": mixed dtypes", [=] { ops::linear_attention_naive(q, k, v.to(torch::kFloat), true); }, ln});

  const std::string li = "linear_attention_initial_state";
  cases.push_back({li + ": negative head count", [=] { ops::linear_attention_initial_state(kB, -1, kDk, kDv, {.dtype = torch::kDouble}); }, li});
  cases.push_back({li + ": negative value width", [=] { ops::linear_attention_initial_state(kB, kH, kDk, -1, {.dtype = torch::kDouble}); }, li});
  cases.push_back({li + ": integer dtype", [=] {
                     ops::linear_attention_initial_state(kB, kH, kDk, kDv, {.dtype = torch::kLong});
                   }, li});

  const std::string ls = "linear_attention_step";
  const auto q_t = rnd({kB, kH, kDk}), k_t = rnd({kB, kH, kDk}), v_t = rnd({kB, kH, kDv});
  const auto fresh_state = [] { return ops::linear_attention_initial_state(kB, kH, kDk, kDv, {.dtype = torch::kDouble}); };
  cases.push_back({ls + ": q_t of rank 4", [=] {
                     auto state = fresh_state();
                     ops::linear_attention_step(q_t.unsqueeze(1), k_t, v_t, state.kv, state.k_sum);
                   }, ls});
  cases.push_back({ls + ": v_t of rank 2", [=] {
                     auto state = fresh_state();
                     ops::linear_attention_step(q_t, k_t, v_t.flatten(1), state.kv, state.k_sum);
                   }, ls});
  cases.push_back({ls + ": state.kv of rank 3", [=] {
                     auto state = fresh_state();
                     state.kv = torch::zeros({kB, kH, kDk * kDv}, kF64);
                     ops::linear_attention_step(q_t, k_t, v_t, state.kv, state.k_sum);
                   }, ls});
  cases.push_back({ls + ": q_t with another head width", [=] {
                     auto state = fresh_state();
                     ops::linear_attention_step(rnd({kB, kH, kDk + 1}), k_t, v_t, state.kv, state.k_sum);
                   }, ls});
  cases.push_back({ls + ": k_t with another head width", [=] {
                     auto state = fresh_state();
                     ops::linear_attention_step(q_t, rnd({kB, kH, kDk + 1}), v_t, state.kv, state.k_sum);
                   }, ls});
  cases.push_back({ls + ": v_t with another value width", [=] {
                     auto state = fresh_state();
                     ops::linear_attention_step(q_t, k_t, rnd({kB, kH, kDv + 1}), state.kv, state.k_sum);
                   }, ls});
  cases.push_back({ls + ": state of batch size 1 for a batch of 2", [=] {
                     auto state = ops::linear_attention_initial_state(1, kH, kDk, kDv, {.dtype = torch::kDouble});
                     ops::linear_attention_step(q_t, k_t, v_t, state.kv, state.k_sum);
                   }, ls});
  cases.push_back({ls + ": state of another key width than q_t and k_t", [=] {
                     auto state = fresh_state();
                     ops::linear_attention_step(rnd({kB, kH, kDk + 1}), rnd({kB, kH, kDk + 1}), v_t, state.kv,
                                                state.k_sum);
                   }, "key features"});
  cases.push_back({ls + ": state without k_sum", [=] {
                     auto state = fresh_state();
                     state.k_sum = torch::Tensor();
                     ops::linear_attention_step(q_t, k_t, v_t, state.kv, state.k_sum);
                   }, ls});

  const std::string lf = "linear_attention_fused";
  cases.push_back({lf + ": q of rank 3", [=] { ops::linear_attention_fused(q.flatten(2), k, v, true); }, lf});
  cases.push_back({lf + ": k of another length", [=] { ops::linear_attention_fused(q, rnd({kB, kT + 1, kH, kDk}), v, false); }, lf});
  cases.push_back({lf + ": v with another head count", [=] { ops::linear_attention_fused(q, k, rnd({kB, kT, kH + 1, kDv}), true); }, lf});
  cases.push_back({lf + ": mixed dtypes", [=] { ops::linear_attention_fused(q.to(torch::kFloat), k, v, false); }, lf});
  cases.push_back({lf + ": float16 (causal)", [=] {
                     ops::linear_attention_fused(q.to(torch::kHalf), k.to(torch::kHalf), v.to(torch::kHalf), true);
                   }, lf});

  return cases;
}

}  // namespace seqmix::ops
