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

// F(beta) = (1/beta) log sum_i p_i exp(beta v_i), for a prior p [n] and values v [n, C]. For small beta
// as mu + log1p(E_p[expm1(beta (v - mu))]) / beta, which keeps full precision as beta -> 0.
torch::Tensor free_energy(const torch::Tensor& p, const torch::Tensor& v, double beta) {
  if (beta >= 1) return torch::logsumexp(p.log().unsqueeze(1) + beta * v, 0) / beta;
  auto mu = (p.unsqueeze(1) * v).sum(0);
  return mu + torch::log1p((p.unsqueeze(1) * torch::expm1(beta * (v - mu))).sum(0)) / beta;
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
      EXPECT_CLOSE(free_energy(p, v, beta), mu + kl / beta, 1e-12, 1e-13);
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

TEST(FreeEnergyIdentities, EveryLambdaHasOneHiddenTemperature) {
  auto [p, v] = random_case(5);
  const double beta_max = 3.0;
  auto mu = (p.unsqueeze(1) * v).sum(0);
  auto f_max = free_energy(p, v, beta_max);
  for (double lambda : {0.0, 0.2, 0.5, 0.9, 1.0}) {
    auto target = (1 - lambda) * mu + lambda * f_max;
    for (int64_t c = 0; c < v.size(1); ++c) {
      // Bisection on F(beta) = target over [0, beta_max]; F is increasing, so the root is unique.
      double lo = 0.0, hi = beta_max;
      auto f = [&](double b) {
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
  auto v = v0.clone().requires_grad_();
  const double beta = 1.7;
  free_energy(p, v, beta).sum().backward();
  auto q = torch::softmax(p.log().unsqueeze(1) + beta * v0, 0);
  EXPECT_CLOSE(v.grad(), q, 1e-12, 1e-14);
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

TEST(AftNaive, MatchesTheExplicitPrefixSoftmaxPerChannel) {
  const int64_t B = 2, T = 8, C = 3;
  auto k = rnd({B, T, C}, 15) * 5, v = rnd({B, T, C}, 16);
  auto read = ops::normalised_read(ops::aft_naive(k, v), 1e-30);
  for (int64_t t = 0; t < T; ++t) {
    auto w = torch::softmax(k.narrow(1, 0, t + 1), 1);  // over i <= t, per channel
    EXPECT_CLOSE(read.select(1, t), (w * v.narrow(1, 0, t + 1)).sum(1), 1e-12, 1e-13);
  }
  // Huge keys stay finite (running max), and the step form equals the loop.
  auto big = ops::normalised_read(ops::aft_naive(k * 1e3, v), 1e-30);
  EXPECT_TRUE(torch::isfinite(big).all().item<bool>());
  auto kg = k.clone().requires_grad_(), vg = v.clone().requires_grad_();
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<torch::Tensor>& x) { return ops::normalised_read(ops::aft_naive(x[0], x[1]), 1e-30); },
      {kg, vg}));
}

TEST(AftNaive, MaskRemovesPaddedPositions) {
  auto k = rnd({1, 6, 2}, 17), v = rnd({1, 6, 2}, 18);
  auto mask = torch::tensor({true, false, true, true, false, true}).view({1, 6});
  auto masked = ops::normalised_read(ops::aft_naive(k, v, mask), 1e-30);
  auto keep = torch::tensor(std::vector<int64_t>{0, 2, 3, 5});
  auto compact = ops::normalised_read(ops::aft_naive(k.index_select(1, keep), v.index_select(1, keep)), 1e-30);
  EXPECT_CLOSE(masked.index_select(1, keep), compact, 1e-12, 1e-14);
}

}  // namespace
}  // namespace seqmix
