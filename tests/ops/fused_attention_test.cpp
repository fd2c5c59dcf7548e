// The fused attention kernel against its naive twin: outputs and every gradient, fp32 fused against
// fp64 naive and fp64 fused against fp64 naive, over awkward lengths, odd head widths and batch 1. PyTorch's
// own kernel (impl torch, the benchmarks' baseline) is held to the same semantics.
#include <gtest/gtest.h>

#include "seqmix/ops/attention.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

struct Shape {
  int64_t B, T, S, H, dk, dv;
};

constexpr auto rnd = &testing::seeded_randn;

void compare(const Shape& s, bool causal, const torch::Tensor& mask, uint64_t seed, ops::Impl impl = ops::Impl::fused) {
  SCOPED_TRACE(ops::impl_name(impl) + " " + "B" + std::to_string(s.B) + " T" + std::to_string(s.T) + " S" + std::to_string(s.S) + " H" +
               std::to_string(s.H) + " dk" + std::to_string(s.dk) + " dv" + std::to_string(s.dv) +
               (causal ? " causal" : " bidirectional") + (mask.defined() ? " masked" : ""));
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.dk));
  auto q = rnd({s.B, s.T, s.H, s.dk}, seed), k = rnd({s.B, s.S, s.H, s.dk}, seed + 1), v = rnd({s.B, s.S, s.H, s.dv}, seed + 2);
  auto dout = rnd({s.B, s.T, s.H, s.dv}, seed + 3);
  auto run = [&](ops::Impl which, torch::ScalarType type) {
    auto leaf = [type](const torch::Tensor& t) { return t.to(type).detach().clone().requires_grad_(); };
    auto qq = leaf(q), kk = leaf(k), vv = leaf(v);
    auto out = ops::attention(qq, kk, vv, {.causal = causal, .scale = scale, .key_mask = mask, .impl = which});
    out.backward(dout.to(type));
    return std::vector<torch::Tensor>{out, qq.grad(), kk.grad(), vv.grad()};
  };
  const auto ref = run(ops::Impl::naive, torch::kDouble);
  const auto f64 = run(impl, torch::kDouble);
  const auto f32 = run(impl, torch::kFloat);
  testing::expect_twins_close(ref, f64, f32, {"out", "dq", "dk", "dv"});
}

TEST(FusedAttention, MatchesNaiveOverAwkwardShapes) {
  uint64_t seed = 10;
  for (int64_t T : {1, 2, 63, 64, 65, 257, 1000})
    for (bool causal : {true, false}) {
      const int64_t B = T >= 257 ? 1 : 2, H = T >= 257 ? 1 : 2;
      compare({B, T, T, H, 8, 8}, causal, {}, seed += 4);
    }
  // Odd head widths, different q/k and v widths, batch 1.
  compare({1, 70, 70, 3, 7, 5}, true, {}, seed += 4);
  compare({1, 33, 33, 1, 1, 13}, false, {}, seed += 4);
}

TEST(FusedAttention, QueriesAsTheLastPositionsAndKeyMasks) {
  compare({2, 5, 90, 2, 6, 4}, true, {}, 100);   // a decode-style block against a longer cache
  compare({1, 1, 130, 2, 8, 8}, true, {}, 104);  // one query
  auto mask = torch::ones({2, 70}, torch::kBool);
  mask.index_put_({0, torch::indexing::Slice(0, 6)}, false);    // left padding
  mask.index_put_({1, torch::indexing::Slice(30, 40)}, false);  // a gap
  compare({2, 70, 70, 2, 8, 8}, true, mask, 108);
  compare({2, 70, 70, 2, 8, 8}, false, mask, 112);
}

TEST(TorchAttention, ScaledDotProductAttentionHasSeqmixsSemantics) {
  uint64_t seed = 200;
  for (int64_t T : {1, 2, 63, 65, 257})
    for (bool causal : {true, false}) compare({T >= 257 ? 1 : 2, T, T, 2, 8, 8}, causal, {}, seed += 4, ops::Impl::torch);
  compare({1, 70, 70, 3, 7, 5}, true, {}, seed += 4, ops::Impl::torch);      // odd widths, dk != dv
  compare({2, 5, 90, 2, 6, 4}, true, {}, seed += 4, ops::Impl::torch);       // queries are the last 5 of 90 keys
  compare({1, 1, 130, 2, 8, 8}, true, {}, seed += 4, ops::Impl::torch);      // one decode step
  auto mask = torch::ones({2, 70}, torch::kBool);
  mask.index_put_({0, torch::indexing::Slice(0, 6)}, false);
  mask.index_put_({1, torch::indexing::Slice(30, 40)}, false);
  compare({2, 70, 70, 2, 8, 8}, true, mask, seed += 4, ops::Impl::torch);
  compare({2, 70, 70, 2, 8, 8}, false, mask, seed += 4, ops::Impl::torch);
}

TEST(FusedAttention, SavesOnlyTheRowLogSumExp) {
  auto q = rnd({1, 9, 2, 4}, 1), k = rnd({1, 9, 2, 4}, 2), v = rnd({1, 9, 2, 3}, 3);
  auto r = ops::softmax_attention_fused_forward(q, k, v, true, 0.5);
  EXPECT_EQ(r.lse.sizes(), (at::IntArrayRef{1, 2, 9}));
  auto scores = torch::matmul(q.transpose(1, 2), k.permute({0, 2, 3, 1})) * 0.5;
  scores = scores.masked_fill(ops::causal_key_mask(9, 9, torch::kCPU).logical_not(), -INFINITY);
  EXPECT_CLOSE(r.lse, torch::logsumexp(scores, -1), 1e-12, 1e-12);
}

TEST(FusedAttention, RejectsBadArguments) {
  auto q = rnd({1, 4, 2, 4}, 1);
  EXPECT_THROW(ops::softmax_attention_fused(q, rnd({1, 4, 2, 5}, 2), rnd({1, 4, 2, 3}, 3), true, 1.0), c10::Error);
  EXPECT_THROW(ops::softmax_attention_fused(q.to(torch::kHalf), q.to(torch::kHalf), q.to(torch::kHalf), true, 1.0),
               c10::Error);
  EXPECT_THROW(ops::softmax_attention_fused(q, q, q, true, 1.0, torch::ones({1, 3}, torch::kBool)), c10::Error);
}

}  // namespace
}  // namespace seqmix
