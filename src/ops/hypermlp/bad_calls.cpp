// hypermlp's calls with bad arguments (the op table's bad_calls): each must fail with one line naming the op or the
// argument. tests/ops/bad_shapes_test.cpp runs them.
#include <torch/torch.h>

#include "../common/bad_call_support.h"
#include "seqmix/ops/hypermlp.h"

namespace seqmix::ops {
using namespace bad_call_support;

std::vector<BadCall> hypermlp_bad_calls() {
  torch::manual_seed(7);
  constexpr int64_t kQk = 3, kVo = 4, kRank = 2, kLmax = 8;
  const auto q = rnd({kB, kT, kH, kQk}), k = rnd({kB, kT, kH, kQk}), v = rnd({kB, kT, kH, kVo});
  const auto mixing = [](int64_t heads, int64_t lmax) {
    return ops::HyperMixing{0.5 * rnd({heads, lmax}), 0.7 * rnd({heads, lmax, kRank}), 0.7 * rnd({heads, kRank, lmax})};
  };
  const auto s1 = torch::sigmoid(rnd({kB, kT, kH, kRank})), s2 = torch::sigmoid(rnd({kB, kT, kH, kRank}));
  const auto mix1 = mixing(kH, kLmax), mix2 = mixing(kH, kLmax);
  ops::HyperReadOptions options;  // relu, lag layout
  options.block = 2;
  std::vector<BadCall> cases;

  using Read = decltype(&ops::hypermlp_read_blocked);
  const std::vector<std::pair<Read, std::string>> reads = {{&ops::hypermlp_read_blocked, "hypermlp_read_blocked"},
                                                           {&ops::hypermlp_read_dense, "hypermlp_read_dense"}};
  for (const auto& entry : reads) {
    const Read read = entry.first;
    const std::string op = entry.second;
    cases.push_back({op + ": q of rank 3", [=] { read(q.flatten(2), k, v, s1, mix1, s2, mix2, options); }, op});
    cases.push_back({op + ": v of another length",
                     [=] { read(q, k, rnd({kB, kT + 1, kH, kVo}), s1, mix1, s2, mix2, options); }, op});
    cases.push_back({op + ": k with another head width",
                     [=] { read(q, rnd({kB, kT, kH, kQk + 1}), v, s1, mix1, s2, mix2, options); }, op});
    cases.push_back({op + ": glu with one score head per value head", [=] {
                       auto o = options;
                       o.activation = ops::HyperActivation::glu;
                       read(q, k, v, {}, {}, s2, mix2, o);
                     }, op});
    cases.push_back({op + ": more queries than keys",
                     [=] { read(rnd({kB, kT + 1, kH, kQk}), k, v, {}, {}, {}, {}, options); }, op});
    cases.push_back({op + ": mixed dtypes", [=] { read(q, k, v.to(torch::kFloat), s1, mix1, s2, mix2, options); }, op});
    cases.push_back({op + ": s1 without its mixing parameters", [=] { read(q, k, v, s1, {}, s2, mix2, options); }, op});
    cases.push_back({op + ": mixing U of rank 2", [=] {
                       auto m = mix1;
                       m.U = m.U.select(2, 0);
                       read(q, k, v, s1, m, s2, mix2, options);
                     }, op});
    cases.push_back({op + ": s2 with another head count",
                     [=] { read(q, k, v, s1, mix1, torch::sigmoid(rnd({kB, kT, kH + 1, kRank})), mix2, options); }, op});
    cases.push_back({op + ": mixing shorter than the keys",
                     [=] { read(q, k, v, s1, mixing(kH, kT - 1), s2, mix2, options); }, op});
    cases.push_back({op + ": float mixing diag", [=] {
                       auto m = mix2;
                       m.diag = m.diag.to(torch::kFloat);
                       read(q, k, v, s1, mix1, s2, m, options);
                     }, op});
    cases.push_back({op + ": negative block", [=] {
                       auto o = options;
                       o.block = -1;
                       read(q, k, v, s1, mix1, s2, mix2, o);
                     }, "block"});
    cases.push_back({op + ": negative eps", [=] {
                       auto o = options;
                       o.eps = -1.0;
                       read(q, k, v, s1, mix1, s2, mix2, o);
                     }, "eps"});
    cases.push_back({op + ": unknown activation", [=] {
                       auto o = options;
                       o.activation = static_cast<ops::HyperActivation>(7);
                       read(q, k, v, s1, mix1, s2, mix2, o);
                     }, "activation"});
  }

  return cases;
}

}  // namespace seqmix::ops
