// The delta rule: its parallel form against the recurrence written out token by token (outputs, the ones read,
// every input gradient), against the decode step (outputs and final state), fp32 against fp64, and by finite
// differences. Lengths from 1 to past 64, odd widths, batch 1.
#include <gtest/gtest.h>

#include "seqmix/ops/delta.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

constexpr auto rnd = &testing::seeded_randn;

// The layers' inputs: unit-norm q and k, b in (0, 1).
struct DeltaInputs {
  torch::Tensor q, k, v, beta;
};
DeltaInputs inputs(int64_t B, int64_t T, int64_t H, int64_t dk, int64_t dv, uint64_t seed) {
  auto unit = [&](uint64_t s) {
    auto x = rnd({B, T, H, dk}, s);
    return x / x.norm(2, {-1}, true);
  };
  return {unit(seed), unit(seed + 1), rnd({B, T, H, dv}, seed + 2), torch::sigmoid(rnd({B, T, H}, seed + 3))};
}

// S <- (I - b k k^T) S + b k v^T and z <- (I - b k k^T) z + b k, as matrices, one loop per (batch, head).
ops::PriorRead recurrence(const DeltaInputs& in) {
  const int64_t B = in.q.size(0), T = in.q.size(1), H = in.q.size(2), dk = in.q.size(3), dv = in.v.size(3);
  std::vector<torch::Tensor> nums, dens;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      auto S = torch::zeros({dk, dv}, in.q.options());
      auto z = torch::zeros({dk}, in.q.options());
      const auto I = torch::eye(dk, in.q.options());
      for (int64_t t = 0; t < T; ++t) {
        const auto k = in.k[b][t][h], bt = in.beta[b][t][h];
        const auto erase = I - bt * torch::outer(k, k);
        S = erase.matmul(S) + bt * torch::outer(k, in.v[b][t][h]);
        z = erase.matmul(z) + bt * k;
        nums.push_back(in.q[b][t][h].matmul(S));
        dens.push_back(in.q[b][t][h].dot(z));
      }
    }
  // Collected in (b, h, t) order.
  auto num = torch::stack(nums).view({B, H, T, dv}).permute({0, 2, 1, 3});
  auto den = torch::stack(dens).view({B, H, T}).permute({0, 2, 1});
  return {num, den};
}

class DeltaRuleLengths : public ::testing::TestWithParam<int64_t> {};

TEST_P(DeltaRuleLengths, ParallelFormEqualsTheRecurrenceWithGradients) {
  const int64_t T = GetParam();
  auto in = inputs(2, T, 3, 5, 3, 20 + static_cast<uint64_t>(T));
  std::vector<torch::Tensor> leaves = {in.q, in.k, in.v, in.beta};
  for (auto& t : leaves) t.requires_grad_();
  const auto dy = rnd({2, T, 3, 3}, 7), dz = rnd({2, T, 3}, 8);
  auto grads_of = [&](const ops::PriorRead& r) {
    return torch::autograd::grad({(r.numerator * dy).sum() + (r.normaliser * dz).sum()}, leaves);
  };
  const auto got = ops::delta_rule_naive(leaves[0], leaves[1], leaves[2], leaves[3]);
  const auto ref = recurrence({leaves[0], leaves[1], leaves[2], leaves[3]});
  EXPECT_CLOSE(got.numerator, ref.numerator, 1e-11, 1e-12);
  EXPECT_CLOSE(got.normaliser, ref.normaliser, 1e-11, 1e-12);
  const auto g_got = grads_of(got), g_ref = grads_of(ref);
  const char* names[] = {"q", "k", "v", "beta"};
  for (size_t i = 0; i < g_got.size(); ++i) EXPECT_CLOSE(g_got[i], g_ref[i], 1e-10, 1e-11) << "gradient of " << names[i];
}

TEST_P(DeltaRuleLengths, DecodeStepsEqualTheParallelForm) {
  const int64_t T = GetParam(), B = 1, H = 2, dk = 3, dv = 5;
  const auto in = inputs(B, T, H, dk, dv, 40 + static_cast<uint64_t>(T));
  const auto full = ops::delta_rule_naive(in.q, in.k, in.v, in.beta);
  auto state = ops::linear_attention_initial_state(B, H, dk, dv, {.dtype = in.q.scalar_type()});
  for (int64_t t = 0; t < T; ++t) {
    const auto r = ops::delta_rule_step(in.q.select(1, t), in.k.select(1, t), in.v.select(1, t), in.beta.select(1, t),
                                        state.kv, state.k_sum);
    state = {r.kv, r.k_sum};
    EXPECT_CLOSE(r.numerator.squeeze(1), full.numerator.select(1, t), 1e-11, 1e-12) << "step " << t;
    EXPECT_CLOSE(r.normaliser.squeeze(1), full.normaliser.select(1, t), 1e-11, 1e-12) << "step " << t;
  }
  // The final state, read by the parallel form: one more token that writes nothing (b = 0) with the unit query
  // e_i reads row i of S_T (and entry i of z_T).
  for (int64_t i = 0; i < dk; ++i) {
    auto e = torch::zeros({B, 1, H, dk}, in.q.options());
    e.select(3, i).fill_(1);
    const auto read = ops::delta_rule_naive(torch::cat({in.q, e}, 1), torch::cat({in.k, e}, 1),
                                            torch::cat({in.v, torch::zeros({B, 1, H, dv}, in.v.options())}, 1),
                                            torch::cat({in.beta, torch::zeros({B, 1, H}, in.beta.options())}, 1));
    EXPECT_CLOSE(read.numerator.select(1, T), state.kv.select(2, i), 1e-11, 1e-12) << "row " << i << " of S";
    EXPECT_CLOSE(read.normaliser.select(1, T), state.k_sum.select(2, i), 1e-11, 1e-12) << "entry " << i << " of z";
  }
}

INSTANTIATE_TEST_SUITE_P(Lengths, DeltaRuleLengths, ::testing::Values(1, 2, 63, 65, 130));

TEST(DeltaRule, Float32FollowsFloat64) {
  const auto in = inputs(1, 97, 2, 8, 7, 60);
  const auto f64 = ops::delta_rule_naive(in.q, in.k, in.v, in.beta);
  const auto f32 = ops::delta_rule_naive(in.q.to(torch::kFloat), in.k.to(torch::kFloat), in.v.to(torch::kFloat),
                                         in.beta.to(torch::kFloat));
  EXPECT_CLOSE(f32.numerator.to(torch::kDouble), f64.numerator, 1e-4, 1e-5);
  EXPECT_CLOSE(f32.normaliser.to(torch::kDouble), f64.normaliser, 1e-4, 1e-5);
}

TEST(DeltaRule, NaiveFormPassesFiniteDifferences) {
  const auto in = inputs(1, 6, 2, 3, 2, 70);
  std::vector<torch::Tensor> leaves = {in.q.clone().requires_grad_(), in.k.clone().requires_grad_(),
                                       in.v.clone().requires_grad_(), in.beta.clone().requires_grad_()};
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<torch::Tensor>& x) {
        const auto r = ops::delta_rule_naive(x[0], x[1], x[2], x[3]);
        return torch::cat({r.numerator.flatten(), r.normaliser.flatten()});
      },
      leaves, 1e-6, 1e-5, 1e-7, 40));
}

TEST(DeltaRule, OneKeyWrittenTwiceIsOverwrittenNotSummed) {
  // With b = 1 the second write of the same key replaces the first value: what makes the delta rule recall.
  auto k = torch::zeros({1, 2, 1, 2}, torch::kDouble);
  k.select(3, 0).fill_(1);
  auto v = torch::tensor({3.0, -5.0}, torch::kDouble).view({1, 2, 1, 1});
  const auto r = ops::delta_rule_naive(k, k, v, torch::ones({1, 2, 1}, torch::kDouble));
  EXPECT_NEAR(r.numerator[0][0][0][0].item<double>(), 3.0, 1e-14);
  EXPECT_NEAR(r.numerator[0][1][0][0].item<double>(), -5.0, 1e-14);
  EXPECT_NEAR(r.normaliser[0][1][0].item<double>(), 1.0, 1e-14);
}

}  // namespace
}  // namespace seqmix
