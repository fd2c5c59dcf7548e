// The fused AFT and SSM scans against their naive twins: outputs and every gradient (random upstream
// gradients), fp64 fused against fp64 naive and fp32 fused against fp64 naive, over lengths around the
// 64-step checkpoints, odd channel and state counts, batch 1, masks and keys spanning a wide range; the
// decode steps replayed over a sequence reproduce the fused outputs.
#include <gtest/gtest.h>

#include "../../src/ops/ssm/fused_kernels.h"  // the raw forward, for its checkpoints
#include "seqmix/ops/aft.h"
#include "seqmix/ops/ssm.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

using torch::indexing::Slice;

constexpr auto rnd = &testing::seeded_randn;

torch::Tensor leaf(const torch::Tensor& t, torch::ScalarType type) {
  return t.to(type).detach().clone().requires_grad_();
}

// ---- AFT ----

struct AftInputs {
  torch::Tensor k, v, mask, grad_numerator, grad_normaliser;
};

AftInputs aft_inputs(int64_t B, int64_t T, int64_t C, double key_scale, uint64_t seed) {
  return {rnd({B, T, C}, seed) * key_scale, rnd({B, T, C}, seed + 1), {}, rnd({B, T, C}, seed + 2),
          rnd({B, T, C}, seed + 3)};
}

// numerator, normaliser, dk, dv.
std::vector<torch::Tensor> run_aft(const AftInputs& in, bool fused, torch::ScalarType type) {
  auto k = leaf(in.k, type), v = leaf(in.v, type);
  auto r = fused ? ops::aft_fused(k, v, in.mask) : ops::aft_naive(k, v, in.mask);
  torch::autograd::backward({r.numerator, r.normaliser}, {in.grad_numerator.to(type), in.grad_normaliser.to(type)});
  return {r.numerator, r.normaliser, k.grad(), v.grad()};
}

void compare_aft(const AftInputs& in) {
  SCOPED_TRACE("B" + std::to_string(in.k.size(0)) + " T" + std::to_string(in.k.size(1)) + " C" +
               std::to_string(in.k.size(2)) + (in.mask.defined() ? " masked" : ""));
  const auto ref = run_aft(in, false, torch::kDouble);
  testing::expect_twins_close(ref, run_aft(in, true, torch::kDouble), run_aft(in, true, torch::kFloat),
                              {"numerator", "normaliser", "dk", "dv"});
}

TEST(FusedAft, MatchesNaiveOverAwkwardShapes) {
  uint64_t seed = 10;
  for (int64_t T : {1, 2, 63, 64, 65, 257, 1000}) {
    const int64_t B = T >= 257 ? 1 : 2, C = T >= 257 ? 5 : 70;  // C = 70: a full channel group and a partial one
    compare_aft(aft_inputs(B, T, C, 1.0, seed += 4));
  }
  compare_aft(aft_inputs(1, 33, 1, 1.0, seed += 4));
}

TEST(FusedAft, KeysSpanningAWideRange) {
  // exp(k) alone would overflow; the running max keeps every exponent <= 0.
  compare_aft(aft_inputs(2, 300, 7, 20.0, 200));
  auto in = aft_inputs(1, 100, 3, 1.0, 204);
  in.k = in.k + torch::linspace(-400, 400, 100, torch::kDouble).view({1, 100, 1});  // a rising max at every step
  compare_aft(in);
}

TEST(FusedAft, MasksLeftPaddingAndAFullyPaddedRow) {
  auto in = aft_inputs(3, 70, 5, 20.0, 300);
  in.mask = torch::ones({3, 70}, torch::kBool);
  in.mask.index_put_({0, Slice(0, 9)}, false);    // left padding
  in.mask.index_put_({1, Slice(30, 40)}, false);  // a gap
  in.mask.index_put_({2}, false);                 // nothing real
  compare_aft(in);
  const auto r = ops::aft_fused(in.k, in.v, in.mask);
  EXPECT_EQ(r.normaliser.index({2}).abs().max().item<double>(), 0.0);
  EXPECT_EQ(r.normaliser.index({0, Slice(0, 9)}).abs().max().item<double>(), 0.0);
}

TEST(FusedAft, OnlyTheNumeratorReachesTheLoss) {
  auto in = aft_inputs(2, 65, 6, 3.0, 400);
  auto grads = [&](bool fused) {
    auto k = leaf(in.k, torch::kDouble), v = leaf(in.v, torch::kDouble);
    auto r = fused ? ops::aft_fused(k, v) : ops::aft_naive(k, v);
    (r.numerator * in.grad_numerator).sum().backward();
    return std::vector<torch::Tensor>{k.grad(), v.grad()};
  };
  const auto ref = grads(false), fused = grads(true);
  EXPECT_CLOSE(fused[0], ref[0], 1e-10, 1e-12);
  EXPECT_CLOSE(fused[1], ref[1], 1e-10, 1e-12);
}

TEST(FusedAft, DecodeStepsReproduceTheFusedScan) {
  auto in = aft_inputs(2, 130, 5, 5.0, 500);
  in.mask = torch::ones({2, 130}, torch::kBool);
  in.mask.index_put_({0, Slice(0, 17)}, false);
  const auto fused = ops::aft_fused(in.k, in.v, in.mask);
  auto state = ops::aft_initial_state(2, 5, {.dtype = in.k.scalar_type()});
  std::vector<torch::Tensor> num, den;
  for (int64_t t = 0; t < 130; ++t) {
    auto r = ops::aft_step(in.k.select(1, t), in.v.select(1, t), state.state_numerator, state.state_normaliser, state.key_max,
                           {.mask_t = in.mask.select(1, t)});
    state = {r.state_numerator, r.state_normaliser, r.key_max};
    num.push_back(r.numerator);
    den.push_back(r.normaliser);
  }
  EXPECT_CLOSE(fused.numerator, torch::cat(num, 1), 1e-12, 1e-14);
  EXPECT_CLOSE(fused.normaliser, torch::cat(den, 1), 1e-12, 1e-14);
}

TEST(FusedAft, RejectsBadArguments) {
  auto k = rnd({1, 4, 3}, 1);
  EXPECT_THROW(ops::aft_fused(k, rnd({1, 4, 2}, 2)), c10::Error);                        // v of another shape
  EXPECT_THROW(ops::aft_fused(k.select(0, 0), k.select(0, 0)), c10::Error);              // rank 2
  EXPECT_THROW(ops::aft_fused(k, k.to(torch::kFloat)), c10::Error);                      // mixed dtypes
  EXPECT_THROW(ops::aft_fused(k.to(torch::kHalf), k.to(torch::kHalf)), c10::Error);      // half
  EXPECT_THROW(ops::aft_fused(k, k, torch::ones({1, 5}, torch::kBool)), c10::Error);     // mask length
  EXPECT_THROW(ops::aft_fused(k, k, torch::ones({1, 4}, torch::kFloat)), c10::Error);    // mask dtype
}

// ---- SSM ----

struct SsmInputs {
  torch::Tensor u, delta, A, b, c, grad_y;
};

// A < 0, delta > 0 and b, c >= 0: the positive-impulse-response regime the mixers use.
SsmInputs ssm_inputs(int64_t B, int64_t T, int64_t C, int64_t N, uint64_t seed) {
  return {rnd({B, T, C}, seed),
          torch::softplus(rnd({B, T, C}, seed + 1)),
          -torch::exp(rnd({C, N}, seed + 2)),
          torch::softplus(rnd({B, T, N}, seed + 3)),
          torch::softplus(rnd({B, T, N}, seed + 4)),
          rnd({B, T, C}, seed + 5)};
}

// y, du, ddelta, dA, db, dc.
std::vector<torch::Tensor> run_ssm(const SsmInputs& in, bool fused, torch::ScalarType type) {
  auto u = leaf(in.u, type), delta = leaf(in.delta, type), A = leaf(in.A, type), b = leaf(in.b, type),
       c = leaf(in.c, type);
  auto y = fused ? ops::ssm_scan_fused(u, delta, A, b, c) : ops::ssm_scan_naive(u, delta, A, b, c);
  y.backward(in.grad_y.to(type));
  return {y, u.grad(), delta.grad(), A.grad(), b.grad(), c.grad()};
}

void compare_ssm(const SsmInputs& in) {
  SCOPED_TRACE("B" + std::to_string(in.u.size(0)) + " T" + std::to_string(in.u.size(1)) + " C" +
               std::to_string(in.u.size(2)) + " N" + std::to_string(in.A.size(1)));
  const auto ref = run_ssm(in, false, torch::kDouble);
  testing::expect_twins_close(ref, run_ssm(in, true, torch::kDouble), run_ssm(in, true, torch::kFloat),
                              {"y", "du", "ddelta", "dA", "db", "dc"});
}

TEST(FusedSsm, MatchesNaiveOverAwkwardShapes) {
  uint64_t seed = 20;
  for (int64_t T : {1, 2, 63, 64, 65, 257, 1000}) {
    const int64_t B = T >= 257 ? 1 : 2, C = T >= 257 ? 5 : 37, N = T >= 257 ? 3 : 4;  // C = 37: two channel groups
    compare_ssm(ssm_inputs(B, T, C, N, seed += 6));
  }
  compare_ssm(ssm_inputs(1, 129, 1, 1, seed += 6));
  compare_ssm(ssm_inputs(3, 70, 5, 16, seed += 6));
}

TEST(FusedSsm, SavesStatesOnlyAtCheckpoints) {
  auto in = ssm_inputs(2, 130, 5, 3, 700);
  const auto r = ops::ssm_scan_fused_forward(in.u, in.delta, in.A, in.b, in.c);
  ASSERT_EQ(r.checkpoints.sizes(), (at::IntArrayRef{2, 3, 3, 5}));  // [B, ceil(T/64), N, C], no [B,T,C,N]
  // Checkpoint j is the state entering step 64 j.
  auto state = torch::zeros({2, 5, 3}, torch::kDouble);
  for (int64_t t = 0; t < 130; ++t) {
    if (t % 64 == 0) {
      EXPECT_CLOSE(r.checkpoints.select(1, t / 64), state.transpose(1, 2), 1e-12, 1e-14) << "t " << t;
    }
    state = ops::ssm_step(in.u.select(1, t), in.delta.select(1, t), in.A, in.b.select(1, t), in.c.select(1, t), state)
                .state;
  }
}

TEST(FusedSsm, DecodeStepsReproduceTheFusedScan) {
  auto in = ssm_inputs(2, 130, 5, 3, 800);
  const auto fused = ops::ssm_scan_fused(in.u, in.delta, in.A, in.b, in.c);
  auto state = torch::zeros({2, 5, 3}, torch::kDouble);
  std::vector<torch::Tensor> ys;
  for (int64_t t = 0; t < 130; ++t) {
    const auto r = ops::ssm_step(in.u.select(1, t), in.delta.select(1, t), in.A, in.b.select(1, t), in.c.select(1, t),
                                 state);
    state = r.state;
    ys.push_back(r.y);
  }
  EXPECT_CLOSE(fused, torch::stack(ys, 1), 1e-12, 1e-14);
}

TEST(FusedSsm, RejectsBadArguments) {
  auto in = ssm_inputs(1, 4, 3, 2, 1);
  EXPECT_THROW(ops::ssm_scan_fused(in.u, in.delta, rnd({4, 2}, 2), in.b, in.c), c10::Error);           // A channels
  EXPECT_THROW(ops::ssm_scan_fused(in.u, in.delta, in.A, rnd({1, 4, 5}, 3), rnd({1, 4, 5}, 4)), c10::Error);  // N
  EXPECT_THROW(ops::ssm_scan_fused(in.u, in.delta.narrow(1, 0, 3), in.A, in.b, in.c), c10::Error);     // delta length
  EXPECT_THROW(ops::ssm_scan_fused(in.u, in.delta, in.A, in.b, in.c.narrow(2, 0, 1)), c10::Error);     // b vs c
  EXPECT_THROW(ops::ssm_scan_fused(in.u.select(0, 0), in.delta, in.A, in.b, in.c), c10::Error);        // rank
  EXPECT_THROW(ops::ssm_scan_fused(in.u.to(torch::kFloat), in.delta, in.A, in.b, in.c), c10::Error);   // mixed dtypes
  EXPECT_THROW(ops::ssm_scan_fused(in.u.to(torch::kLong), in.delta.to(torch::kLong), in.A.to(torch::kLong),
                                   in.b.to(torch::kLong), in.c.to(torch::kLong)),
               c10::Error);  // integer
}

}  // namespace
}  // namespace seqmix
