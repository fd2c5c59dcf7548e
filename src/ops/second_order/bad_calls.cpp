// second_order's calls with bad arguments (the op table's bad_calls): each must fail with one line naming the op or the
// argument. tests/ops/bad_shapes_test.cpp runs them.
#include <torch/torch.h>

#include "../common/bad_call_support.h"
#include "seqmix/ops/second_order.h"

namespace seqmix::ops {
using namespace bad_call_support;

std::vector<BadCall> second_order_bad_calls() {
  torch::manual_seed(9);
  const auto q = rnd({kB, kT, kH, kDk}), k = rnd({kB, kT, kH, kDk}), v = rnd({kB, kT, kH, kDv});
  const auto temperature = positive({kH}), bias_scale = rnd({kH}), tau = rnd({kH});
  std::vector<BadCall> cases;

  // The O(N d) form (its errors name mha2nd1st_read) and the one with the covariance formed explicitly.
  using Mha = decltype(&ops::mha2nd1st_read_fused);
  const std::vector<std::pair<Mha, std::string>> mhas = {{&ops::mha2nd1st_read_fused, "mha2nd1st_read"},
                                                         {&ops::mha2nd1st_read_covariance, "mha2nd1st_read_covariance"}};
  for (const auto& entry : mhas) {
    const Mha read = entry.first;
    const std::string op = entry.second;
    cases.push_back({op + ": q of rank 3", [=] { read(q.flatten(2), k, temperature, bias_scale, true); }, op});
    cases.push_back({op + ": k with another head width", [=] { read(q, rnd({kB, kT, kH, kDk + 1}), temperature, bias_scale, true); }, op});
    cases.push_back({op + ": k with another batch size", [=] { read(q, rnd({kB + 1, kT, kH, kDk}), temperature, bias_scale, false); }, op});
    cases.push_back({op + ": temperature with another entry count", [=] { read(q, k, positive({kH + 1}), bias_scale, true); }, op});
    cases.push_back({op + ": bias_scale of rank 2", [=] { read(q, k, temperature, bias_scale.unsqueeze(0), true); }, op});
    cases.push_back({op + ": a zero temperature", [=] { read(q, k, temperature * 0, bias_scale, true); }, "temperature must be > 0"});
    cases.push_back({op + ": temperature missing", [=] { read(q, k, torch::Tensor(), bias_scale, true); }, op});
    cases.push_back({op + ": mixed dtypes", [=] { read(q, k.to(torch::kFloat), temperature, bias_scale, true); }, op});
  }

  using Light = decltype(&ops::light2nd1st_read_fused);
  const std::vector<std::pair<Light, std::string>> lights = {
      {&ops::light2nd1st_read_fused, "light2nd1st_read"},
      {&ops::light2nd1st_read_covariance, "light2nd1st_read_covariance"}};
  for (const auto& entry : lights) {
    const Light read = entry.first;
    const std::string op = entry.second;
    cases.push_back({op + ": q of rank 3", [=] { read(q.flatten(2), k, v, 0.5, tau, true); }, op});
    cases.push_back({op + ": v of another key length", [=] { read(q, k, rnd({kB, kT + 1, kH, kDv}), 0.5, tau, true); }, op});
    cases.push_back({op + ": v with another head count", [=] { read(q, k, rnd({kB, kT, kH + 1, kDv}), 0.5, tau, false); }, op});
    cases.push_back({op + ": tau with another entry count", [=] { read(q, k, v, 0.5, rnd({kH + 1}), true); }, op});
    cases.push_back({op + ": tau missing", [=] { read(q, k, v, 0.5, torch::Tensor(), true); }, op});
    cases.push_back({op + ": mixed dtypes", [=] { read(q, k, v.to(torch::kFloat), 0.5, tau, true); }, op});
    cases.push_back({op + ": non-finite scale", [=] { read(q, k, v, kNaN, tau, true); }, "scale"});
  }

  return cases;
}

}  // namespace seqmix::ops
