// The chunked forms in ATen (impl=chunked: GLA per head and per key, linear attention causal and bidirectional)
// against their naive twins: outputs and the gradients w.r.t. q, k, v and the log decay, fp64 chunked against fp64
// naive (tight) and fp32 chunked against fp64 naive (loose), at lengths around the chunk sizes (16 per key, 64 per
// head), T = 1, odd head widths, strong, mixed and zero decay, and packed sequences with empty and length-1 ones.
#include <gtest/gtest.h>

#include "seqmix/ops/gla.h"
#include "seqmix/ops/linear_attention.h"
#include "scan_twins.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

using scan_twins::describe;
using scan_twins::Op;
using scan_twins::Shape;

constexpr auto rnd = &testing::seeded_randn;

// log sigmoid of N(3, 2^2), as a gated layer makes them (mostly in [-1, 0], a few down to -5), per head or per key.
torch::Tensor gate_log_decay(std::vector<int64_t> shape, uint64_t seed) {
  return torch::log_sigmoid(3.0 + 2.0 * rnd(std::move(shape), seed));
}

// The implementation against the naive twin, with fixed random upstream gradients.
void expect_matches(const Op& chunked, const Op& naive, const std::vector<torch::Tensor>& inputs) {
  const auto& v = inputs[2];
  scan_twins::expect_matches(chunked, naive, inputs, rnd(v.sizes().vec(), 91), rnd({v.size(0), v.size(1), v.size(2)}, 92));
}

Op gla_with(bool chunked, const torch::Tensor& cu_seqlens = {}) {
  return [chunked, cu_seqlens](const std::vector<torch::Tensor>& x) {
    return chunked ? ops::gla_chunked(x[0], x[1], x[2], x[3], cu_seqlens) : ops::gla_naive(x[0], x[1], x[2], x[3], cu_seqlens);
  };
}

void compare_gla(const Shape& s, const torch::Tensor& log_decay, uint64_t seed, const torch::Tensor& cu_seqlens = {}) {
  SCOPED_TRACE(describe(s) + (log_decay.dim() == 4 ? " per key" : " per head"));
  expect_matches(gla_with(true, cu_seqlens), gla_with(false, cu_seqlens),
                 {rnd({s.B, s.T, s.H, s.dk}, seed), rnd({s.B, s.T, s.H, s.dk}, seed + 1),
                  rnd({s.B, s.T, s.H, s.dv}, seed + 2), log_decay});
}

TEST(ChunkedGla, MatchesNaiveAroundTheChunkSizePerHead) {
  uint64_t seed = 10;
  for (int64_t T : {1, 2, 63, 64, 65, 130, 300}) {
    const Shape s{T >= 130 ? 1 : 2, T, 2, 8, 6};
    seed += 5;
    compare_gla(s, gate_log_decay({s.B, s.T, s.H}, seed), seed);
  }
}

TEST(ChunkedGla, MatchesNaiveAroundTheChunkSizePerKey) {
  uint64_t seed = 100;
  for (int64_t T : {1, 15, 16, 17, 33, 70}) {
    const Shape s{2, T, 2, 5, 3};
    seed += 5;
    compare_gla(s, gate_log_decay({s.B, s.T, s.H, s.dk}, seed), seed);
  }
}

TEST(ChunkedGla, MatchesNaiveWithStrongMixedAndZeroDecay) {
  const Shape s{1, 150, 2, 6, 4};
  auto mixed = torch::zeros({s.B, s.T, s.H, s.dk}, torch::kDouble);
  mixed.narrow(-1, 0, 3).fill_(-5.0);
  compare_gla(s, mixed, 500);
  compare_gla(s, torch::full({s.B, s.T, s.H}, -5.0, torch::kDouble), 505);
  compare_gla(s, torch::full({s.B, s.T, s.H}, -30.0, torch::kDouble), 507);  // exp(-30 * 64) underflows: no NaN
  compare_gla(s, torch::zeros({s.B, s.T, s.H}, torch::kDouble), 515);
}

// Packed: a chunk never straddles two sequences; empty and length-1 sequences among them.
TEST(ChunkedGla, PackedSequencesMatchNaive) {
  const auto cu = torch::tensor({0, 5, 5, 6, 80, 100}, torch::kLong);
  const Shape s{1, 100, 2, 4, 3};
  compare_gla(s, gate_log_decay({s.B, s.T, s.H}, 600), 600, cu);
  compare_gla(s, gate_log_decay({s.B, s.T, s.H, s.dk}, 610), 610, cu);
}

TEST(ChunkedLinearAttention, MatchesNaiveCausalAndBidirectionalAndPacked) {
  const auto cu = torch::tensor({0, 1, 1, 70, 90}, torch::kLong);
  for (bool causal : {true, false})
    for (const auto& packed : {torch::Tensor(), cu}) {
      const Shape s{packed.defined() ? 1 : 2, 90, 2, 7, 5};
      SCOPED_TRACE(describe(s) + (causal ? " causal" : " bidirectional") + (packed.defined() ? " packed" : ""));
      const Op chunked = [causal, packed](const std::vector<torch::Tensor>& x) {
        return ops::linear_attention_chunked(x[0], x[1], x[2], causal, packed);
      };
      const Op naive = [causal, packed](const std::vector<torch::Tensor>& x) {
        return ops::linear_attention_naive(x[0], x[1], x[2], causal, packed);
      };
      expect_matches(chunked, naive,
                     {rnd({s.B, s.T, s.H, s.dk}, 700).abs(), rnd({s.B, s.T, s.H, s.dk}, 701).abs(),
                      rnd({s.B, s.T, s.H, s.dv}, 702)});
    }
}

TEST(ChunkedGla, TheEntryPointRunsIt) {
  const Shape s{1, 40, 2, 4, 3};
  const auto q = rnd({s.B, s.T, s.H, s.dk}, 1), k = rnd({s.B, s.T, s.H, s.dk}, 2), v = rnd({s.B, s.T, s.H, s.dv}, 3);
  const auto a = gate_log_decay({s.B, s.T, s.H}, 4);
  const auto through_op = ops::gla(q, k, v, a, {.impl = ops::Impl::chunked});
  const auto direct = ops::gla_chunked(q, k, v, a);
  EXPECT_TRUE(torch::equal(through_op.numerator, direct.numerator));
  EXPECT_TRUE(torch::equal(through_op.normaliser, direct.normaliser));
}

}  // namespace
}  // namespace seqmix
