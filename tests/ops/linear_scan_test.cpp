// Linear attention, GLA and the selective scan: naive forms against their recurrences written out
// token by token, decode steps against the naive forms, and finite-difference gradients.
#include <gtest/gtest.h>

#include "seqmix/ops/gla.h"
#include "seqmix/ops/linear_attention.h"
#include "seqmix/ops/ssm.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

constexpr auto rnd = &testing::seeded_randn;
torch::Tensor positive(std::vector<int64_t> shape, uint64_t seed) { return torch::softplus(rnd(shape, seed)); }

// S_t = e^{a_t} S_{t-1} + k_t v_t^T, z_t = e^{a_t} z_{t-1} + k_t, one explicit loop per (b, h).
ops::PriorRead decayed_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const torch::Tensor& log_decay) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2);
  auto num = torch::zeros({B, T, H, v.size(3)}, q.options());
  auto den = torch::zeros({B, T, H}, q.options());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      auto S = torch::zeros({q.size(3), v.size(3)}, q.options());
      auto z = torch::zeros({q.size(3)}, q.options());
      for (int64_t t = 0; t < T; ++t) {
        const double g = std::exp(log_decay[b][t][h].item<double>());
        S = g * S + torch::outer(k[b][t][h], v[b][t][h]);
        z = g * z + k[b][t][h];
        num[b][t][h] = q[b][t][h].matmul(S);
        den[b][t][h] = q[b][t][h].dot(z);
      }
    }
  return {num, den};
}

TEST(LinearAttentionNaive, CausalMatchesRecurrence) {
  auto q = positive({2, 6, 3, 4}, 1), k = positive({2, 6, 3, 4}, 2), v = rnd({2, 6, 3, 5}, 3);
  auto ref = decayed_reference(q, k, v, torch::zeros({2, 6, 3}, torch::kDouble));
  auto got = ops::linear_attention_naive(q, k, v, true);
  EXPECT_CLOSE(got.numerator, ref.numerator, 1e-12, 1e-13);
  EXPECT_CLOSE(got.normaliser, ref.normaliser, 1e-12, 1e-13);
}

TEST(LinearAttentionNaive, BidirectionalReadsEveryKey) {
  auto q = positive({1, 5, 2, 3}, 4), k = positive({1, 5, 2, 3}, 5), v = rnd({1, 5, 2, 4}, 6);
  auto got = ops::linear_attention_naive(q, k, v, false);
  auto w = torch::einsum("bthd,bshd->bhts", {q, k});
  EXPECT_CLOSE(got.numerator, torch::einsum("bhts,bshe->bthe", {w, v}), 1e-12, 1e-13);
  EXPECT_CLOSE(got.normaliser, w.sum(-1).transpose(1, 2), 1e-12, 1e-13);
}

TEST(GlaNaive, MatchesRecurrenceAndIsStableForLongDecay) {
  auto q = positive({2, 9, 2, 3}, 7), k = positive({2, 9, 2, 3}, 8), v = rnd({2, 9, 2, 4}, 9);
  auto a = -positive({2, 9, 2}, 10);
  auto ref = decayed_reference(q, k, v, a);
  auto got = ops::gla_naive(q, k, v, a);
  EXPECT_CLOSE(got.numerator, ref.numerator, 1e-12, 1e-13);
  EXPECT_CLOSE(got.normaliser, ref.normaliser, 1e-12, 1e-13);
  // A total log decay of -4000 would overflow a cumulative e^{-c} form; the masked exponent never does.
  auto strong = torch::full({1, 400, 1}, -10.0, torch::kDouble);
  auto long_read = ops::gla_naive(positive({1, 400, 1, 2}, 11), positive({1, 400, 1, 2}, 12), rnd({1, 400, 1, 2}, 13), strong);
  EXPECT_TRUE(torch::isfinite(long_read.numerator).all().item<bool>());
}

TEST(LinearScans, DecodeStepsEqualNaive) {
  const int64_t B = 2, T = 7, H = 3, dk = 4, dv = 5;
  auto q = positive({B, T, H, dk}, 14), k = positive({B, T, H, dk}, 15), v = rnd({B, T, H, dv}, 16);
  auto a = -positive({B, T, H}, 17);
  auto lin = ops::linear_attention_naive(q, k, v, true);
  auto gla = ops::gla_naive(q, k, v, a);
  auto s_lin = ops::linear_attention_initial_state(B, H, dk, dv, {.dtype = q.scalar_type()});
  auto s_gla = ops::linear_attention_initial_state(B, H, dk, dv, {.dtype = q.scalar_type()});
  for (int64_t t = 0; t < T; ++t) {
    auto r1 = ops::linear_attention_step(q.select(1, t), k.select(1, t), v.select(1, t), s_lin.kv, s_lin.k_sum);
    auto r2 = ops::gla_step(q.select(1, t), k.select(1, t), v.select(1, t), a.select(1, t), s_gla.kv, s_gla.k_sum);
    s_lin = {r1.kv, r1.k_sum};
    s_gla = {r2.kv, r2.k_sum};
    EXPECT_CLOSE(r1.numerator.squeeze(1), lin.numerator.select(1, t), 1e-12, 1e-13);
    EXPECT_CLOSE(r1.normaliser.squeeze(1), lin.normaliser.select(1, t), 1e-12, 1e-13);
    EXPECT_CLOSE(r2.numerator.squeeze(1), gla.numerator.select(1, t), 1e-12, 1e-13);
    EXPECT_CLOSE(r2.normaliser.squeeze(1), gla.normaliser.select(1, t), 1e-12, 1e-13);
  }
}

TEST(LinearScans, FiniteDifferenceGradients) {
  auto q = positive({1, 5, 2, 3}, 18).requires_grad_(), k = positive({1, 5, 2, 3}, 19).requires_grad_();
  auto v = rnd({1, 5, 2, 4}, 20).requires_grad_(), a = (-positive({1, 5, 2}, 21)).requires_grad_();
  for (bool causal : {true, false})
    EXPECT_TRUE(testing::gradcheck(
        [causal](const std::vector<torch::Tensor>& x) {
          auto r = ops::linear_attention_naive(x[0], x[1], x[2], causal);
          return ops::normalised_read(r.numerator, r.normaliser, 1e-9);
        },
        {q, k, v}));
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<torch::Tensor>& x) {
        auto r = ops::gla_naive(x[0], x[1], x[2], x[3]);
        return torch::cat({r.numerator.flatten(), r.normaliser.flatten()});
      },
      {q, k, v, a}));
  // A decay per key feature [B,T,H,dk].
  auto a_key = (-positive({1, 5, 2, 3}, 22)).requires_grad_();
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<torch::Tensor>& x) {
        auto r = ops::gla_naive(x[0], x[1], x[2], x[3]);
        return torch::cat({r.numerator.flatten(), r.normaliser.flatten()});
      },
      {q, k, v, a_key}));
}

TEST(SsmScanNaive, MatchesElementwiseRecurrence) {
  const int64_t B = 2, T = 6, C = 3, N = 4;
  auto u = rnd({B, T, C}, 22), delta = positive({B, T, C}, 23), A = -positive({C, N}, 24);
  auto b = positive({B, T, N}, 25), c = positive({B, T, N}, 26);
  auto y = ops::ssm_scan_naive(u, delta, A, b, c);
  auto ua = u.accessor<double, 3>(), da = delta.accessor<double, 3>();
  auto Aa = A.accessor<double, 2>();
  auto ba = b.accessor<double, 3>(), ca = c.accessor<double, 3>();
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t ch = 0; ch < C; ++ch) {
      std::vector<double> h(N, 0.0);
      for (int64_t t = 0; t < T; ++t) {
        double out = 0;
        for (int64_t n = 0; n < N; ++n) {
          h[n] = std::exp(da[bi][t][ch] * Aa[ch][n]) * h[n] + da[bi][t][ch] * ba[bi][t][n] * ua[bi][t][ch];
          out += ca[bi][t][n] * h[n];
        }
        EXPECT_NEAR(y[bi][t][ch].item<double>(), out, 1e-12 * (1 + std::abs(out)));
      }
    }
}

TEST(SsmScanNaive, ImpulseResponseIsPositive) {
  const int64_t T = 12;
  auto u = torch::zeros({1, T, 2}, torch::kDouble);
  u.index_put_({0, 0}, 1.0);
  auto y = ops::ssm_scan_naive(u, positive({1, T, 2}, 27), -positive({2, 3}, 28), positive({1, T, 3}, 29),
                               positive({1, T, 3}, 30));
  EXPECT_TRUE((y > 0).all().item<bool>());
}

TEST(SsmScanNaive, FiniteDifferenceGradients) {
  auto u = rnd({1, 5, 3}, 31).requires_grad_(), delta = positive({1, 5, 3}, 32).requires_grad_();
  auto A = (-positive({3, 2}, 33)).requires_grad_(), b = positive({1, 5, 2}, 34).requires_grad_();
  auto c = positive({1, 5, 2}, 35).requires_grad_();
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<torch::Tensor>& x) { return ops::ssm_scan_naive(x[0], x[1], x[2], x[3], x[4]); },
      {u, delta, A, b, c}));
}

TEST(LinearScans, WrongShapesAreErrors) {
  auto q = positive({1, 5, 2, 3}, 1);
  EXPECT_THROW(ops::linear_attention_naive(q, q, positive({1, 4, 2, 3}, 2), true), c10::Error);
  EXPECT_THROW(ops::gla_naive(q, q, q, torch::zeros({1, 5}, torch::kDouble)), c10::Error);
  EXPECT_THROW(ops::ssm_scan_naive(torch::zeros({1, 5, 3}, torch::kDouble), torch::zeros({1, 5, 3}, torch::kDouble),
                                   torch::zeros({2, 2}, torch::kDouble), torch::zeros({1, 5, 2}, torch::kDouble),
                                   torch::zeros({1, 5, 2}, torch::kDouble)),
               c10::Error);
}

}  // namespace
}  // namespace seqmix
