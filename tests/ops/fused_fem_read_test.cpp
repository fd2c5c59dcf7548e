// The fused FEM softmax read against its definitional twin: mu, F and every gradient (q, k, v, beta),
// fp64 and fp32 fused against fp64 naive, over awkward lengths, odd widths, masks and clipped values.
#include <gtest/gtest.h>

#include "seqmix/ops/fem.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

struct Shape {
  int64_t B, T, S, H, dk, dv;
};

constexpr auto rnd = &testing::seeded_randn;

// value_scale 30 with beta around 1-2 pushes many |beta v| past the cap, so the clamp is exercised.
void compare(const Shape& s, bool causal, const torch::Tensor& mask, uint64_t seed, double value_scale = 3.0,
             double cap = 40.0) {
  SCOPED_TRACE("B" + std::to_string(s.B) + " T" + std::to_string(s.T) + " S" + std::to_string(s.S) + " H" +
               std::to_string(s.H) + " dk" + std::to_string(s.dk) + " dv" + std::to_string(s.dv) +
               (causal ? " causal" : " bidirectional") + (mask.defined() ? " masked" : "") + " value scale " +
               std::to_string(value_scale));
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.dk));
  auto q = rnd({s.B, s.T, s.H, s.dk}, seed) * 1.5, k = rnd({s.B, s.S, s.H, s.dk}, seed + 1);
  auto v = rnd({s.B, s.S, s.H, s.dv}, seed + 2) * value_scale;
  auto beta = torch::softplus(rnd({s.H * s.dv}, seed + 3)) + 0.5;
  auto d_mean = rnd({s.B, s.T, s.H, s.dv}, seed + 4), d_free = rnd({s.B, s.T, s.H, s.dv}, seed + 5);
  auto run = [&](bool fused, torch::ScalarType type) {
    auto leaf = [type](const torch::Tensor& t) { return t.to(type).detach().clone().requires_grad_(); };
    auto qq = leaf(q), kk = leaf(k), vv = leaf(v), bb = leaf(beta);
    auto r = fused ? ops::fem_softmax_read_fused(qq, kk, vv, bb, cap, causal, scale, mask)
                   : ops::fem_softmax_read_naive(qq, kk, vv, bb, cap, causal, scale, mask);
    ((r.mean * d_mean.to(type)).sum() + (r.free_energy * d_free.to(type)).sum()).backward();
    return std::vector<torch::Tensor>{r.mean, r.free_energy, qq.grad(), kk.grad(), vv.grad(), bb.grad()};
  };
  const auto ref = run(false, torch::kDouble);
  const auto f64 = run(true, torch::kDouble);
  const auto f32 = run(true, torch::kFloat);
  testing::TwinTolerances tolerances;
  tolerances.fp64_rtol = 1e-9;
  tolerances.fp64_atol = 1e-11;
  tolerances.fp32_rtol = tolerances.fp32_atol = 5e-4;
  testing::expect_twins_close(ref, f64, f32, {"mu", "F", "dq", "dk", "dv", "dbeta"}, tolerances);
}

TEST(FusedFemRead, MatchesNaiveOverAwkwardShapes) {
  uint64_t seed = 10;
  for (int64_t T : {1, 2, 63, 64, 65, 257, 1000})
    for (bool causal : {true, false}) {
      const int64_t B = T >= 257 ? 1 : 2, H = T >= 257 ? 1 : 2;
      compare({B, T, T, H, 8, 4}, causal, {}, seed += 8);
    }
  compare({1, 70, 70, 3, 7, 5}, true, {}, seed += 8);   // odd head widths
  compare({1, 33, 33, 1, 1, 13}, false, {}, seed += 8);
}

TEST(FusedFemRead, ClippedValuesAndSmallCaps) {
  compare({2, 150, 150, 2, 8, 6}, true, {}, 200, 30.0);        // most of |beta v| beyond the cap
  compare({1, 130, 130, 2, 4, 3}, true, {}, 210, 30.0, 5.0);   // a tight cap
  compare({1, 90, 90, 1, 4, 3}, false, {}, 220, 30.0, 40.0);
}

TEST(FusedFemRead, QueriesAsTheLastPositionsAndKeyMasks) {
  compare({2, 5, 90, 2, 6, 4}, true, {}, 300);
  auto mask = torch::ones({2, 140}, torch::kBool);
  mask.index_put_({0, torch::indexing::Slice(0, 70)}, false);  // left padding past a query block
  mask.index_put_({1, 100}, false);
  compare({2, 140, 140, 2, 6, 4}, true, mask, 310);
  compare({2, 140, 140, 2, 6, 4}, false, mask, 320);
}

TEST(FusedFemRead, ChangingAKeyLeavesEarlierRowsBitIdentical) {
  // The channel shift only involves keys every row of a block sees, so fp32 outputs before t are exact.
  auto q = rnd({1, 200, 2, 8}, 1).to(torch::kFloat), k = rnd({1, 200, 2, 8}, 2).to(torch::kFloat);
  auto v = (rnd({1, 200, 2, 4}, 3) * 20).to(torch::kFloat);
  auto beta = torch::full({8}, 1.5f);
  auto r = ops::fem_softmax_read_fused(q, k, v, beta, 40.0, true, 0.35);
  for (int64_t t : {1, 70, 150}) {
    auto v2 = v.clone(), k2 = k.clone();
    v2.select(1, t).fill_(25.0f);  // a new channel maximum
    k2.select(1, t).mul_(3.0f);
    auto r2 = ops::fem_softmax_read_fused(q, k2, v2, beta, 40.0, true, 0.35);
    EXPECT_TRUE(torch::equal(r.mean.narrow(1, 0, t), r2.mean.narrow(1, 0, t))) << "mu before " << t;
    EXPECT_TRUE(torch::equal(r.free_energy.narrow(1, 0, t), r2.free_energy.narrow(1, 0, t))) << "F before " << t;
    EXPECT_FALSE(torch::equal(r.free_energy.narrow(1, t, 1), r2.free_energy.narrow(1, t, 1))) << "no effect at " << t;
  }
}

TEST(FusedFemRead, RejectsWhatItCannotComputeExactly) {
  auto q = torch::randn({1, 4, 1, 2}), v = torch::randn({1, 4, 1, 3});
  auto beta = torch::ones({3});
  EXPECT_THROW(ops::fem_softmax_read_fused(q, q, v, beta, 0.0, true, 1.0), std::exception);   // no cap
  EXPECT_THROW(ops::fem_softmax_read_fused(q, q, v, beta, 42.0, true, 1.0), std::exception);  // fp32 range
  EXPECT_NO_THROW(ops::fem_softmax_read_fused(q.to(torch::kDouble), q.to(torch::kDouble), v.to(torch::kDouble),
                                              beta.to(torch::kDouble), 42.0, true, 1.0));
  EXPECT_THROW(ops::fem_softmax_read_fused(q, q, v, torch::ones({2}), 40.0, true, 1.0), std::exception);  // beta width
  EXPECT_THROW(ops::fem_softmax_read_fused(q, torch::randn({1, 4, 1, 3}), v, beta, 40.0, true, 1.0), std::exception);
}

}  // namespace
}  // namespace seqmix
