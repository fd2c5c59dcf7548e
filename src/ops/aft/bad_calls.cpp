// aft's calls with bad arguments (the op table's bad_calls): each must fail with one line naming the op or the
// argument. tests/ops/bad_shapes_test.cpp runs them.
#include <torch/torch.h>

#include "../common/bad_call_support.h"
#include "seqmix/ops/aft.h"

namespace seqmix::ops {
using namespace bad_call_support;

std::vector<BadCall> aft_bad_calls() {
  torch::manual_seed(1);
  const auto k = rnd({kB, kT, kC}), v = rnd({kB, kT, kC});
  std::vector<BadCall> cases;

  const std::string ai = "aft_initial_state";
  cases.push_back({ai + ": negative batch size", [=] { ops::aft_initial_state(-1, kC, {.dtype = torch::kDouble}); }, ai});
  cases.push_back({ai + ": negative channel count", [=] { ops::aft_initial_state(kB, -1, {.dtype = torch::kDouble}); }, ai});
  cases.push_back({ai + ": integer dtype", [=] { ops::aft_initial_state(kB, kC, {.dtype = torch::kLong}); }, ai});

  const std::string an = "aft_naive";
  cases.push_back({an + ": k of rank 4", [=] { ops::aft_naive(k.unsqueeze(0), v); }, an});
  cases.push_back({an + ": v of rank 2", [=] { ops::aft_naive(k, v.select(0, 0)); }, an});
  cases.push_back({an + ": v of another length", [=] { ops::aft_naive(k, rnd({kB, kT + 1, kC})); }, an});
  cases.push_back({an + ": v with another channel count", [=] { ops::aft_naive(k, rnd({kB, kT, kC + 1})); }, an});
  cases.push_back({an + ": mixed dtypes", [=] { ops::aft_naive(k, v.to(torch::kFloat)); }, an});
  cases.push_back({an + ": mask of another length", [=] { ops::aft_naive(k, v, all_true({kB, kT - 1})); }, an});
  cases.push_back({an + ": mask of another batch size", [=] { ops::aft_naive(k, v, all_true({kB + 1, kT})); }, an});
  cases.push_back({an + ": float mask", [=] { ops::aft_naive(k, v, torch::ones({kB, kT})); }, an});

  const std::string as = "aft_step";
  const auto k_t = rnd({kB, kC}), v_t = rnd({kB, kC});
  cases.push_back({as + ": k_t of rank 3", [=] {
                     auto state = ops::aft_initial_state(kB, kC, {.dtype = torch::kDouble});
                     ops::aft_step(rnd({kB, 1, kC}), v_t, state.state_numerator, state.state_normaliser, state.key_max);
                   }, as});
  cases.push_back({as + ": v_t of rank 1", [=] {
                     auto state = ops::aft_initial_state(kB, kC, {.dtype = torch::kDouble});
                     ops::aft_step(k_t, rnd({kC}), state.state_numerator, state.state_normaliser, state.key_max);
                   }, as});
  cases.push_back({as + ": v_t with another channel count", [=] {
                     auto state = ops::aft_initial_state(kB, kC, {.dtype = torch::kDouble});
                     ops::aft_step(k_t, rnd({kB, kC + 1}), state.state_numerator, state.state_normaliser, state.key_max);
                   }, as});
  cases.push_back({as + ": state of another batch size", [=] {
                     auto state = ops::aft_initial_state(kB + 1, kC, {.dtype = torch::kDouble});
                     ops::aft_step(k_t, v_t, state.state_numerator, state.state_normaliser, state.key_max);
                   }, as});
  cases.push_back({as + ": mask_t of another batch size", [=] {
                     auto state = ops::aft_initial_state(kB, kC, {.dtype = torch::kDouble});
                     ops::aft_step(k_t, v_t, state.state_numerator, state.state_normaliser, state.key_max,
                                   {.mask_t = all_true({kB + 1})});
                   }, as});
  cases.push_back({as + ": float mask_t", [=] {
                     auto state = ops::aft_initial_state(kB, kC, {.dtype = torch::kDouble});
                     ops::aft_step(k_t, v_t, state.state_numerator, state.state_normaliser, state.key_max,
                                   {.mask_t = torch::ones({kB})});
                   }, as});

  const std::string af = "aft_fused";
  cases.push_back({af + ": k of rank 2", [=] { ops::aft_fused(k.select(0, 0), v); }, af});
  cases.push_back({af + ": v of another length", [=] { ops::aft_fused(k, rnd({kB, kT + 1, kC})); }, af});
  cases.push_back({af + ": mixed dtypes", [=] { ops::aft_fused(k.to(torch::kFloat), v); }, af});
  cases.push_back({af + ": float16", [=] { ops::aft_fused(k.to(torch::kHalf), v.to(torch::kHalf)); }, af});
  cases.push_back({af + ": mask of another length", [=] { ops::aft_fused(k, v, all_true({kB, kT + 1})); }, af});
  cases.push_back({af + ": float mask", [=] { ops::aft_fused(k, v, torch::ones({kB, kT}, kF64)); }, af});

  return cases;
}

}  // namespace seqmix::ops
