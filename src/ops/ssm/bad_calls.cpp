// ssm's calls with bad arguments (the op table's bad_calls): each must fail with one line naming the op or the
// argument. tests/ops/bad_shapes_test.cpp runs them.
#include <torch/torch.h>

#include "../common/bad_call_support.h"
#include "seqmix/ops/ssm.h"

namespace seqmix::ops {
using namespace bad_call_support;

std::vector<BadCall> ssm_bad_calls() {
  torch::manual_seed(2);
  const auto u = rnd({kB, kT, kC}), delta = torch::softplus(rnd({kB, kT, kC})), A = -positive({kC, kN});
  const auto b = rnd({kB, kT, kN}), c = rnd({kB, kT, kN});
  std::vector<BadCall> cases;

  const std::string sn = "ssm_scan_naive";
  cases.push_back({sn + ": u of rank 2", [=] { ops::ssm_scan_naive(u.select(0, 0), delta, A, b, c); }, sn});
  cases.push_back({sn + ": A of rank 3", [=] { ops::ssm_scan_naive(u, delta, A.unsqueeze(0), b, c); }, sn});
  cases.push_back({sn + ": A with another channel count", [=] { ops::ssm_scan_naive(u, delta, -positive({kC + 1, kN}), b, c); }, sn});
  cases.push_back({sn + ": delta of another length", [=] { ops::ssm_scan_naive(u, delta.narrow(1, 0, kT - 1), A, b, c); }, sn});
  cases.push_back({sn + ": b and c of another length",
                   [=] { ops::ssm_scan_naive(u, delta, A, rnd({kB, kT + 1, kN}), rnd({kB, kT + 1, kN})); }, sn});
  cases.push_back({sn + ": c with another state size", [=] { ops::ssm_scan_naive(u, delta, A, b, rnd({kB, kT, kN + 1})); }, sn});
  cases.push_back({sn + ": mixed dtypes", [=] { ops::ssm_scan_naive(u, delta, A.to(torch::kFloat), b, c); }, sn});

  const std::string ss = "ssm_step";
  const auto u_t = rnd({kB, kC}), delta_t = torch::softplus(rnd({kB, kC})), b_t = rnd({kB, kN}), c_t = rnd({kB, kN});
  const auto fresh_state = [] { return torch::zeros({kB, kC, kN}, kF64); };
  cases.push_back({ss + ": u_t of rank 3", [=] {
                     auto state = fresh_state();
                     ops::ssm_step(rnd({kB, 1, kC}), delta_t, A, b_t, c_t, state);
                   }, ss});
  cases.push_back({ss + ": state of rank 2", [=] {
                     auto state = torch::zeros({kB, kC * kN}, kF64);
                     ops::ssm_step(u_t, delta_t, A, b_t, c_t, state);
                   }, ss});
  cases.push_back({ss + ": A of rank 1", [=] {
                     auto state = fresh_state();
                     ops::ssm_step(u_t, delta_t, -positive({kN}), b_t, c_t, state);
                   }, ss});
  cases.push_back({ss + ": A with another channel count", [=] {
                     auto state = fresh_state();
                     ops::ssm_step(u_t, delta_t, -positive({kC + 1, kN}), b_t, c_t, state);
                   }, ss});
  cases.push_back({ss + ": delta_t with another channel count", [=] {
                     auto state = fresh_state();
                     ops::ssm_step(u_t, torch::softplus(rnd({kB, kC + 1})), A, b_t, c_t, state);
                   }, ss});
  cases.push_back({ss + ": b_t with another state size", [=] {
                     auto state = fresh_state();
                     ops::ssm_step(u_t, delta_t, A, rnd({kB, kN + 1}), c_t, state);
                   }, ss});
  cases.push_back({ss + ": state of another batch size", [=] {
                     auto state = torch::zeros({kB + 1, kC, kN}, kF64);
                     ops::ssm_step(u_t, delta_t, A, b_t, c_t, state);
                   }, ss});

  const std::string sf = "ssm_scan_fused";
  cases.push_back({sf + ": u of rank 2", [=] { ops::ssm_scan_fused(u.select(0, 0), delta, A, b, c); }, sf});
  cases.push_back({sf + ": delta of another length", [=] { ops::ssm_scan_fused(u, delta.narrow(1, 0, kT - 1), A, b, c); }, sf});
  cases.push_back({sf + ": A with another state size", [=] { ops::ssm_scan_fused(u, delta, -positive({kC, kN + 1}), b, c); }, sf});
  cases.push_back({sf + ": b and c of another batch size",
                   [=] { ops::ssm_scan_fused(u, delta, A, rnd({kB + 1, kT, kN}), rnd({kB + 1, kT, kN})); }, sf});
  cases.push_back({sf + ": mixed dtypes", [=] { ops::ssm_scan_fused(u.to(torch::kFloat), delta, A, b, c); }, sf});
  cases.push_back({sf + ": float16", [=] {
                     const auto h = torch::kHalf;
                     ops::ssm_scan_fused(u.to(h), delta.to(h), A.to(h), b.to(h), c.to(h));
                   }, sf});

  return cases;
}

}  // namespace seqmix::ops
