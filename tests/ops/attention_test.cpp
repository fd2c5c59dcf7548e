// Naive attention ops against row-by-row references, and finite-difference gradients.
#include <gtest/gtest.h>

#include "seqmix/ops/attention.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

using torch::indexing::Slice;

constexpr auto rnd = &testing::seeded_randn;

// One query row at a time, over its visible keys only.
torch::Tensor reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                        bool relu, double scale) {
  const int64_t B = q.size(0), T = q.size(1), S = k.size(1), H = q.size(2);
  auto out = torch::zeros({B, T, H, v.size(3)}, q.options());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t visible = causal ? t + (S - T) + 1 : S;
        auto keys = k.index({b, Slice(0, visible), h});    // [n,d]
        auto vals = v.index({b, Slice(0, visible), h});    // [n,dv]
        auto s = keys.matmul(q.index({b, t, h}));           // [n]
        auto w = relu ? torch::relu(s / (s.square().sum() + 1e-12).sqrt()) : torch::softmax(s * scale, 0);
        out.index_put_({b, t, h}, w.matmul(vals));
      }
  return out;
}

TEST(SoftmaxAttentionNaive, MatchesRowReference) {
  for (bool causal : {true, false}) {
    auto q = rnd({2, 5, 3, 4}, 1), k = rnd({2, 5, 3, 4}, 2), v = rnd({2, 5, 3, 6}, 3);
    EXPECT_CLOSE(ops::softmax_attention_naive(q, k, v, causal, 0.7), reference(q, k, v, causal, false, 0.7), 1e-12, 1e-14);
  }
}

TEST(SoftmaxAttentionNaive, QueriesAreTheLastPositionsOfTheKeys) {
  auto q = rnd({1, 2, 2, 4}, 4), k = rnd({1, 6, 2, 4}, 5), v = rnd({1, 6, 2, 3}, 6);
  EXPECT_CLOSE(ops::softmax_attention_naive(q, k, v, true, 0.5), reference(q, k, v, true, false, 0.5), 1e-12, 1e-14);
}

TEST(ReluAttentionNaive, MatchesRowReference) {
  for (bool causal : {true, false}) {
    auto q = rnd({2, 7, 2, 4}, 7), k = rnd({2, 7, 2, 4}, 8), v = rnd({2, 7, 2, 5}, 9);
    EXPECT_CLOSE(ops::relu_attention_naive(q, k, v, causal, 1e-12), reference(q, k, v, causal, true, 1.0), 1e-12, 1e-14);
  }
}

TEST(AttentionNaive, FiniteDifferenceGradients) {
  for (bool causal : {true, false}) {
    auto q = rnd({1, 4, 2, 3}, 10).requires_grad_(), k = rnd({1, 4, 2, 3}, 11).requires_grad_(),
         v = rnd({1, 4, 2, 5}, 12).requires_grad_();
    EXPECT_TRUE(testing::gradcheck(
        [causal](const std::vector<torch::Tensor>& x) { return ops::softmax_attention_naive(x[0], x[1], x[2], causal, 0.6); },
        {q, k, v}));
    EXPECT_TRUE(testing::gradcheck(
        [causal](const std::vector<torch::Tensor>& x) { return ops::relu_attention_naive(x[0], x[1], x[2], causal, 1e-12); },
        {q, k, v}));
  }
}

TEST(AttentionNaive, WrongShapesNameTheArgument) {
  auto q = rnd({1, 4, 2, 3}, 1), v = rnd({1, 4, 2, 5}, 2);
  try {
    ops::softmax_attention_naive(q, rnd({1, 4, 3}, 3), v, true, 1.0);
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("argument k must have shape [B,S,H,dk]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops::softmax_attention_naive(q, rnd({1, 4, 2, 4}, 3), v, true, 1.0), c10::Error);
  EXPECT_THROW(ops::softmax_attention_naive(q, q, v.to(torch::kFloat), true, 1.0), c10::Error);
}

}  // namespace
}  // namespace seqmix
