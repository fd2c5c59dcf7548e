// The fused chunked GLA scan against its naive twin: outputs and the gradients w.r.t. q, k, v and the log
// decay, fp64 fused against fp64 naive (tight) and fp32 fused against fp64 naive (loose), over lengths
// around the chunk size, odd head widths, strong and zero decay, per head and per key feature; fused linear attention against its
// naive twin; the decode step against the scan; argument checks.
#include <gtest/gtest.h>

#include "seqmix/ops/gla.h"
#include "seqmix/ops/linear_attention.h"
#include "scan_twins.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

using scan_twins::describe;
using scan_twins::expect_matches;
using scan_twins::Op;
using scan_twins::Shape;

constexpr auto rnd = &testing::seeded_randn;

// log sigmoid of N(3, 2^2), as a gated layer produces them: mostly in [-1, 0] so the state carries across
// chunks, a few down to -5.
torch::Tensor gate_log_decay(const Shape& s, uint64_t seed) {
  return torch::log_sigmoid(3.0 + 2.0 * rnd({s.B, s.T, s.H}, seed));
}

const Op gla_fused_op = [](const std::vector<torch::Tensor>& x) { return ops::gla_fused(x[0], x[1], x[2], x[3]); };
const Op gla_naive_op = [](const std::vector<torch::Tensor>& x) { return ops::gla_naive(x[0], x[1], x[2], x[3]); };

void compare_gla(const Shape& s, const torch::Tensor& log_decay, uint64_t seed) {
  SCOPED_TRACE(describe(s));
  expect_matches(gla_fused_op, gla_naive_op,
                 {rnd({s.B, s.T, s.H, s.dk}, seed), rnd({s.B, s.T, s.H, s.dk}, seed + 1),
                  rnd({s.B, s.T, s.H, s.dv}, seed + 2), log_decay},
                 rnd({s.B, s.T, s.H, s.dv}, seed + 3), rnd({s.B, s.T, s.H}, seed + 4));
}

TEST(FusedGla, MatchesNaiveAroundTheChunkSize) {
  uint64_t seed = 10;
  for (int64_t T : {1, 2, 63, 64, 65, 257, 1000}) {
    const int64_t B = T >= 257 ? 1 : 2, H = T >= 257 ? 1 : 2;
    const Shape s{B, T, H, 8, 8};
    seed += 5;
    compare_gla(s, gate_log_decay(s, seed), seed);
  }
}

TEST(FusedGla, MatchesNaiveWithOddHeadWidths) {
  const Shape odd{1, 70, 3, 7, 5};
  compare_gla(odd, gate_log_decay(odd, 100), 100);
  const Shape unit{2, 130, 2, 1, 13};  // LRNN-decay: unit key features
  compare_gla(unit, gate_log_decay(unit, 110), 110);
}

TEST(FusedGla, MatchesNaiveWithStrongAndZeroDecay) {
  const Shape s{1, 300, 2, 6, 4};
  // -5 per step: a chunk spans e^{-320}, below fp32's range; the scan must stay finite.
  compare_gla(s, torch::full({s.B, s.T, s.H}, -5.0, torch::kDouble), 200);
  compare_gla(s, -3.0 - 2.0 * torch::rand({s.B, s.T, s.H}, torch::kDouble), 205);
  compare_gla(s, torch::zeros({s.B, s.T, s.H}, torch::kDouble), 210);
}

TEST(FusedGla, AcceptsHeadMajorInputs) {
  // [B,H,T,d] storage viewed as [B,T,H,d], as a layer that splits heads after a projection may pass.
  const Shape s{2, 90, 3, 5, 4};
  auto head_major = [](const torch::Tensor& t) { return t.transpose(1, 2).contiguous().transpose(1, 2); };
  const std::vector<torch::Tensor> inputs{head_major(rnd({2, 90, 3, 5}, 1)), head_major(rnd({2, 90, 3, 5}, 2)),
                                          head_major(rnd({2, 90, 3, 4}, 3)), head_major(gate_log_decay(s, 4))};
  ASSERT_FALSE(inputs[0].is_contiguous());
  expect_matches(gla_fused_op, gla_naive_op, inputs, rnd({2, 90, 3, 4}, 5), rnd({2, 90, 3}, 6));
}

TEST(FusedGla, GradientsWhenOnlyTheNumeratorIsUsed) {
  const Shape s{1, 100, 2, 4, 3};
  std::vector<torch::Tensor> leaves;
  for (auto t : {rnd({1, 100, 2, 4}, 1), rnd({1, 100, 2, 4}, 2), rnd({1, 100, 2, 3}, 3), gate_log_decay(s, 4)})
    leaves.push_back(t.requires_grad_());
  auto grads_of = [&](const Op& op) {
    auto read = op(leaves);
    (read.numerator * rnd({1, 100, 2, 3}, 5)).sum().backward();
    std::vector<torch::Tensor> g;
    for (auto& leaf : leaves) {
      g.push_back(leaf.grad().clone());
      leaf.mutable_grad().reset();
    }
    return g;
  };
  const auto fused = grads_of(gla_fused_op), naive = grads_of(gla_naive_op);
  for (size_t i = 0; i < fused.size(); ++i) EXPECT_CLOSE(fused[i], naive[i], 1e-10, 1e-12);
}

// Decoding position by position from a fresh state equals the fused scan, for a log decay per head or per key.
void expect_steps_match_scan(const Shape& s, const torch::Tensor& a) {
  auto q = rnd({s.B, s.T, s.H, s.dk}, 1), k = rnd({s.B, s.T, s.H, s.dk}, 2), v = rnd({s.B, s.T, s.H, s.dv}, 3);
  auto state = ops::linear_attention_initial_state(s.B, s.H, s.dk, s.dv, {.dtype = q.scalar_type()});
  std::vector<torch::Tensor> numerators, normalisers;
  for (int64_t t = 0; t < s.T; ++t) {
    auto r = ops::gla_step(q.select(1, t), k.select(1, t), v.select(1, t), a.select(1, t), state.kv, state.k_sum);
    state = {r.kv, r.k_sum};
    numerators.push_back(r.numerator);
    normalisers.push_back(r.normaliser);
  }
  auto scan = ops::gla_fused(q, k, v, a);
  EXPECT_CLOSE(torch::cat(numerators, 1), scan.numerator, 1e-10, 1e-12);
  EXPECT_CLOSE(torch::cat(normalisers, 1), scan.normaliser, 1e-10, 1e-12);
}

TEST(FusedGla, DecodeStepsMatchTheScan) {
  const Shape s{2, 70, 3, 5, 4};
  expect_steps_match_scan(s, gate_log_decay(s, 4));
}

// Per-key decays [B,T,H,dk], as the gla mixer's per_key=1 makes them: log sigmoid of N(3, 2^2) per feature.
torch::Tensor per_key_log_decay(const Shape& s, uint64_t seed) {
  return torch::log_sigmoid(3.0 + 2.0 * rnd({s.B, s.T, s.H, s.dk}, seed));
}

TEST(FusedGlaPerKey, MatchesNaiveAroundTheChunkSize) {
  uint64_t seed = 300;
  for (int64_t T : {1, 2, 63, 64, 65, 130}) {
    const Shape s{2, T, 2, 5, 3};
    seed += 5;
    compare_gla(s, per_key_log_decay(s, seed), seed);
  }
}

TEST(FusedGlaPerKey, MatchesNaiveWithOddWidthsAndUnitKeys) {
  const Shape odd{1, 70, 3, 7, 5};
  compare_gla(odd, per_key_log_decay(odd, 400), 400);
  const Shape unit{2, 66, 2, 1, 9};  // dk = 1: per key is per head
  compare_gla(unit, per_key_log_decay(unit, 410), 410);
}

TEST(FusedGlaPerKey, MatchesNaiveWithStrongMixedAndZeroDecay) {
  const Shape s{1, 150, 2, 6, 4};
  // Per feature: some forget at once (-5 per step), some keep everything (0).
  auto mixed = torch::zeros({s.B, s.T, s.H, s.dk}, torch::kDouble);
  mixed.narrow(-1, 0, 3).fill_(-5.0);
  compare_gla(s, mixed, 500);
  compare_gla(s, torch::full({s.B, s.T, s.H, s.dk}, -5.0, torch::kDouble), 505);
  compare_gla(s, -3.0 - 2.0 * torch::rand({s.B, s.T, s.H, s.dk}, torch::kDouble), 510);
  compare_gla(s, torch::zeros({s.B, s.T, s.H, s.dk}, torch::kDouble), 515);
}

TEST(FusedGlaPerKey, EqualsPerHeadWhenEveryFeatureDecaysAlike) {
  const Shape s{2, 90, 2, 4, 3};
  const auto q = rnd({s.B, s.T, s.H, s.dk}, 1), k = rnd({s.B, s.T, s.H, s.dk}, 2), v = rnd({s.B, s.T, s.H, s.dv}, 3);
  const auto a = gate_log_decay(s, 4);
  const auto per_head = ops::gla_fused(q, k, v, a);
  const auto per_key = ops::gla_fused(q, k, v, a.unsqueeze(-1).expand({s.B, s.T, s.H, s.dk}));
  EXPECT_CLOSE(per_key.numerator, per_head.numerator, 1e-10, 1e-12);
  EXPECT_CLOSE(per_key.normaliser, per_head.normaliser, 1e-10, 1e-12);
}

TEST(FusedGlaPerKey, DecodeStepsMatchTheScan) {
  const Shape s{2, 70, 3, 5, 4};
  expect_steps_match_scan(s, per_key_log_decay(s, 4));
}

TEST(FusedLinearAttention, MatchesNaiveCausalAndBidirectional) {
  for (bool causal : {true, false})
    for (const Shape& s : {Shape{2, 65, 2, 8, 8}, Shape{1, 200, 3, 7, 5}}) {
      SCOPED_TRACE(describe(s) + (causal ? " causal" : " bidirectional"));
      const Op fused = [causal](const std::vector<torch::Tensor>& x) {
        return ops::linear_attention_fused(x[0], x[1], x[2], causal);
      };
      const Op naive = [causal](const std::vector<torch::Tensor>& x) {
        return ops::linear_attention_naive(x[0], x[1], x[2], causal);
      };
      expect_matches(fused, naive, {rnd({s.B, s.T, s.H, s.dk}, 1), rnd({s.B, s.T, s.H, s.dk}, 2), rnd({s.B, s.T, s.H, s.dv}, 3)},
                     rnd({s.B, s.T, s.H, s.dv}, 4), rnd({s.B, s.T, s.H}, 5));
    }
}

TEST(FusedGla, RejectsBadArguments) {
  auto q = rnd({1, 4, 2, 3}, 1), v = rnd({1, 4, 2, 5}, 2), a = -torch::rand({1, 4, 2}, torch::kDouble);
  EXPECT_THROW(ops::gla_fused(q, rnd({1, 4, 2, 4}, 3), v, a), c10::Error);          // k wider than q
  EXPECT_THROW(ops::gla_fused(q, q, rnd({1, 5, 2, 5}, 3), a), c10::Error);          // v longer
  EXPECT_THROW(ops::gla_fused(q, q, v, a.unsqueeze(-1)), c10::Error);               // log_decay [B,T,H,1], dk 3
  EXPECT_THROW(ops::gla_fused(q, q, v, a.unsqueeze(-1).unsqueeze(-1)), c10::Error);  // log_decay of rank 5
  EXPECT_THROW(ops::gla_fused(q, q, v, -torch::rand({1, 4, 3}, torch::kDouble)), c10::Error);  // heads
  EXPECT_THROW(ops::gla_fused(q[0], q[0], v[0], a[0]), c10::Error);                 // no batch dimension
  EXPECT_THROW(ops::gla_fused(q, q, v.to(torch::kFloat), a), c10::Error);           // mixed dtypes
  EXPECT_THROW(ops::gla_fused(q.to(torch::kHalf), q.to(torch::kHalf), v.to(torch::kHalf), a.to(torch::kHalf)),
               c10::Error);
  EXPECT_THROW(ops::linear_attention_fused(q, q, rnd({1, 3, 2, 5}, 4), true), c10::Error);
  EXPECT_THROW(ops::linear_attention_fused(q, rnd({1, 4, 2, 4}, 5), v, false), c10::Error);
}

}  // namespace
}  // namespace seqmix
