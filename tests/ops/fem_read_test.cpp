// The free-energy read: the paper's identities on random priors and values (fp64), and the ops that
// compute it (the definitional softmax read, and [v, exp(beta v - cap)] read through a prior's op).
#include <gtest/gtest.h>

#include "seqmix/ops/aft.h"
#include "seqmix/ops/attention.h"
#include "seqmix/ops/fem.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

constexpr auto rnd = &testing::seeded_randn;

// The library's free-energy read on a given prior: one head whose scores are log p (q = 1, k_i = log p_i,
// scale 1), so softmax attention's weights are exactly p. Every query row sees the same prior when the
// read is bidirectional; causally, row t sees p restricted to keys 0..t and renormalised.
// p [n], v [n, C] -> mean and F per row, [n, C].
struct PriorRead {
  torch::Tensor mean, free_energy;
};
PriorRead read_on_prior(const torch::Tensor& p, const torch::Tensor& v, double beta, bool causal = false,
                        bool fused = false) {
  const int64_t n = p.size(0), C = v.size(1);
  auto q = torch::ones({1, n, 1, 1}, p.options());
  auto k = p.log().view({1, n, 1, 1});
  auto betas = torch::full({C}, beta, v.options());
  // The fused read needs a cap; callers keep |beta v| below it so nothing is clamped.
  auto r = fused ? ops::fem_softmax_read_fused(q, k, v.view({1, n, 1, C}), betas, ops::kMaxConstantShiftCap, causal, 1.0)
                 : ops::fem_softmax_read_naive(q, k, v.view({1, n, 1, C}), betas, 0.0, causal, 1.0);
  return {r.mean.view({n, C}), r.free_energy.view({n, C})};
}
// F of the full prior (bidirectional read, row 0): [C].
torch::Tensor free_energy(const torch::Tensor& p, const torch::Tensor& v, double beta, bool fused = false) {
  return read_on_prior(p, v, beta, false, fused).free_energy[0];
}

struct Case {
  torch::Tensor p, v;
};
Case random_case(uint64_t seed) {
  return {torch::softmax(rnd({9}, seed) * 2, 0), rnd({9, 5}, seed + 1)};
}

TEST(FreeEnergyIdentities, MeanPlusKlOverBeta) {
  for (uint64_t seed : {1, 2, 3}) {
    auto [p, v] = random_case(seed);
    for (double beta : {0.3, 1.0, 4.0}) {
      auto mu = (p.unsqueeze(1) * v).sum(0);
      auto q = torch::softmax(p.log().unsqueeze(1) + beta * v, 0);      // posterior per channel
      auto kl = (p.unsqueeze(1) * (p.log().unsqueeze(1) - q.log())).sum(0);  // KL(p || q_beta)
      for (bool fused : {false, true}) {
        const auto read = read_on_prior(p, v, beta, false, fused);
        EXPECT_CLOSE(read.mean[0], mu, 1e-12, 1e-13) << "fused " << fused;
        EXPECT_CLOSE(read.free_energy[0], mu + kl / beta, 1e-12, 1e-13) << "fused " << fused << " beta " << beta;
      }
    }
  }
}

TEST(FreeEnergyIdentities, IncreasingInBetaFromTheMeanToTheMax) {
  auto [p, v] = random_case(4);
  auto mu = (p.unsqueeze(1) * v).sum(0);
  auto max = std::get<0>(v.max(0));
  auto previous = free_energy(p, v, 1e-4);
  EXPECT_CLOSE(previous, mu, 1e-3, 1e-4);  // beta -> 0: the mean
  for (double beta : {0.01, 0.1, 1.0, 10.0, 100.0}) {
    auto f = free_energy(p, v, beta);
    EXPECT_TRUE((f > previous).all().item<bool>()) << "beta " << beta;
    EXPECT_TRUE((f <= max + 1e-12).all().item<bool>());
    previous = f;
  }
  // beta -> infinity: the max on the support, within log(1/p_argmax)/beta.
  auto f = free_energy(p, v, 1e5);
  EXPECT_CLOSE(f, max, 0, -p.log().min().item<double>() / 1e5 + 1e-12);
}

TEST(FreeEnergyIdentities, AtHighBetaTheMaxIsTakenOnTheSupportOnly) {
  // Causal rows restrict the prior to keys 0..t: F tends to the max over those keys, and a larger value
  // later in the sequence (off the support) must not pull it up.
  auto [p, v] = random_case(15);
  v[6].fill_(50.0);  // far above every other value, visible only from row 6 on
  const double beta = 1e5;
  const auto read = read_on_prior(p, v, beta, /*causal=*/true);
  for (int64_t t = 0; t < p.size(0); ++t) {
    auto support = p.narrow(0, 0, t + 1) / p.narrow(0, 0, t + 1).sum();
    auto max_on_support = std::get<0>(v.narrow(0, 0, t + 1).max(0));
    const double slack = -support.log().min().item<double>() / beta + 1e-12;
    EXPECT_CLOSE(read.free_energy[t], max_on_support, 0, slack) << "row " << t;
    EXPECT_TRUE((read.free_energy[t] < 50.0 - 1.0).all().item<bool>() == (t < 6)) << "row " << t;
  }
  // At moderate beta F stays between the support's mean and its max.
  const auto mid = read_on_prior(p, v, 0.7, true);
  for (int64_t t = 0; t < p.size(0); ++t) {
    auto max_on_support = std::get<0>(v.narrow(0, 0, t + 1).max(0));
    EXPECT_TRUE((mid.free_energy[t] >= mid.mean[t] - 1e-12).all().item<bool>()) << t;
    EXPECT_TRUE((mid.free_energy[t] <= max_on_support + 1e-12).all().item<bool>()) << t;
  }
}

TEST(FreeEnergyIdentities, EveryLambdaHasOneHiddenTemperature) {
  auto [p, v] = random_case(5);
  const double beta_max = 3.0;
  auto mu = (p.unsqueeze(1) * v).sum(0);
  auto f_max = free_energy(p, v, beta_max);
  // lambda = 0 is beta = 0, the mean, by definition; the library reads F in log space, whose rounding
  // (~1e-16 / beta) would blur a bisection towards beta = 0, so the smallest lambda here is 0.05.
  for (double lambda : {0.05, 0.2, 0.5, 0.9, 1.0}) {
    auto target = (1 - lambda) * mu + lambda * f_max;
    for (int64_t c = 0; c < v.size(1); ++c) {
      // Bisection on F(beta) = target over [0, beta_max]; F is increasing, so the root is unique.
      double lo = 0.0, hi = beta_max;
      auto f = [&](double b) {  // F(0) is the mean by definition
        return b < 1e-12 ? mu[c].item<double>() : free_energy(p, v.select(1, c).unsqueeze(1), b).item<double>();
      };
      const double t = target[c].item<double>();
      for (int it = 0; it < 200; ++it) {
        const double mid = 0.5 * (lo + hi);
        (f(mid) < t ? lo : hi) = mid;
      }
      EXPECT_GE(lo, 0.0);
      EXPECT_LE(hi, beta_max);
      EXPECT_NEAR(f(0.5 * (lo + hi)), t, 1e-10) << "lambda " << lambda << " channel " << c;
    }
  }
}

TEST(FreeEnergyIdentities, GradientWithRespectToValuesIsThePosterior) {
  auto [p, v0] = random_case(6);
  const double beta = 1.7;
  auto q = torch::softmax(p.log().unsqueeze(1) + beta * v0, 0);
  for (bool fused : {false, true}) {
    auto v = v0.clone().requires_grad_();
    free_energy(p, v, beta, fused).sum().backward();
    EXPECT_CLOSE(v.grad(), q, 1e-12, 1e-14) << "fused " << fused;
  }
}

TEST(FemSoftmaxRead, DefinitionMatchesTheReadThroughTheAttentionOp) {
  // FEM reads [v_clipped, exp(beta v_clipped - cap)] through softmax attention; restoring log z + cap
  // over beta gives the definitional free energy, for every cap (0 = no clamp) and both directions.
  const int64_t B = 2, T = 7, H = 2, dk = 4, dv = 3;
  auto q = rnd({B, T, H, dk}, 7), k = rnd({B, T, H, dk}, 8), v = rnd({B, T, H, dv}, 9) * 3;
  auto beta = torch::softplus(rnd({H * dv}, 10)) + 0.5;
  for (bool causal : {true, false})
    for (double cap : {40.0, 3.0}) {
      auto ref = ops::fem_softmax_read_naive(q, k, v, beta, cap, causal, 0.5);
      auto values = ops::fem_scale_values(v.flatten(2), beta, cap);
      auto vc = values.clipped.view(v.sizes()), u = values.scaled.view(v.sizes());
      auto read = ops::softmax_attention_naive(q, k, torch::cat({vc, (u - cap).exp()}, -1), causal, 0.5);
      EXPECT_CLOSE(read.narrow(-1, 0, dv), ref.mean, 1e-12, 1e-13);
      auto f = ops::fem_restore(read.narrow(-1, dv, dv).flatten(2), torch::scalar_tensor(cap, torch::kDouble), beta);
      EXPECT_CLOSE(f.view(v.sizes()), ref.free_energy, 1e-11, 1e-12) << "cap " << cap << " causal " << causal;
    }
}

TEST(FemSoftmaxRead, CapClampsBetaVAndGradientsAreFiniteDifferences) {
  const int64_t T = 5, H = 1, dk = 2, dv = 2;
  auto q = rnd({1, T, H, dk}, 11).requires_grad_(), k = rnd({1, T, H, dk}, 12).requires_grad_();
  auto v = (rnd({1, T, H, dv}, 13) * 2).requires_grad_();
  auto beta = (torch::softplus(rnd({H * dv}, 14)) + 0.5).requires_grad_();
  const double cap = 1.5;
  auto values = ops::fem_scale_values(v.flatten(2), beta, cap);
  EXPECT_TRUE((values.scaled.abs() <= cap + 1e-12).all().item<bool>());
  for (double c : {0.0, cap})
    EXPECT_TRUE(testing::gradcheck(
        [c](const std::vector<torch::Tensor>& x) {
          auto r = ops::fem_softmax_read_naive(x[0], x[1], x[2], x[3], c, true, 0.7);
          return torch::cat({r.mean.flatten(), r.free_energy.flatten()});
        },
        {q, k, v, beta}));
}

// ops::normalised_read of an op's (numerator, normaliser).
torch::Tensor normalised_read_of(const ops::PriorRead& read, double eps) {
  return ops::normalised_read(read.numerator, read.normaliser, eps);
}

TEST(AftNaive, MatchesTheExplicitPrefixSoftmaxPerChannel) {
  const int64_t B = 2, T = 8, C = 3;
  auto k = rnd({B, T, C}, 15) * 5, v = rnd({B, T, C}, 16);
  auto read = normalised_read_of(ops::aft_naive(k, v), 1e-30);
  for (int64_t t = 0; t < T; ++t) {
    auto w = torch::softmax(k.narrow(1, 0, t + 1), 1);  // over i <= t, per channel
    EXPECT_CLOSE(read.select(1, t), (w * v.narrow(1, 0, t + 1)).sum(1), 1e-12, 1e-13);
  }
  // Huge keys stay finite (running max), and the step form equals the loop.
  auto big = normalised_read_of(ops::aft_naive(k * 1e3, v), 1e-30);
  EXPECT_TRUE(torch::isfinite(big).all().item<bool>());
  auto kg = k.clone().requires_grad_(), vg = v.clone().requires_grad_();
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<torch::Tensor>& x) { return normalised_read_of(ops::aft_naive(x[0], x[1]), 1e-30); },
      {kg, vg}));
}

TEST(AftNaive, MaskRemovesPaddedPositions) {
  auto k = rnd({1, 6, 2}, 17), v = rnd({1, 6, 2}, 18);
  auto mask = torch::tensor({true, false, true, true, false, true}).view({1, 6});
  auto masked = normalised_read_of(ops::aft_naive(k, v, mask), 1e-30);
  auto keep = torch::tensor(std::vector<int64_t>{0, 2, 3, 5});
  auto compact = normalised_read_of(ops::aft_naive(k.index_select(1, keep), v.index_select(1, keep)), 1e-30);
  EXPECT_CLOSE(masked.index_select(1, keep), compact, 1e-12, 1e-14);
}

}  // namespace
}  // namespace seqmix
