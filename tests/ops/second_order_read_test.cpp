// The energy paper's Newton-inspired reads: the O(N d) forms equal the explicit covariance forms (outputs
// and gradients, fp64), and the derivation behind MHA2nd1st holds: the Hessian of the Helmholtz energy with
// the squared-distance local energy is W1^T [I - Cov_p(k)/T] W1, the range-space (pseudo-inverse) Newton
// step equals a direct solve, and its first-order Taylor form is the MHA2nd1st read with c = 1/T.
#include <gtest/gtest.h>

#include "seqmix/ops/second_order.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

constexpr auto rnd = &testing::seeded_randn;

std::vector<torch::Tensor> with_grads(const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& f,
                                      const std::vector<torch::Tensor>& inputs) {
  std::vector<torch::Tensor> leaves;
  for (const auto& t : inputs) leaves.push_back(t.detach().clone().requires_grad_());
  auto out = f(leaves);
  out.backward(rnd(out.sizes().vec(), 77));
  std::vector<torch::Tensor> r{out};
  for (const auto& l : leaves) r.push_back(l.grad());
  return r;
}

TEST(SecondOrderRead, Mha2nd1stLinearFormEqualsExplicitCovariance) {
  for (bool causal : {true, false})
    for (auto [T, S] : {std::pair<int64_t, int64_t>{6, 6}, {3, 7}}) {
      if (!causal && T != S) continue;
      std::vector<torch::Tensor> in = {rnd({2, T, 3, 4}, 1), rnd({2, S, 3, 4}, 2),
                                       torch::rand({3}, torch::kDouble) + 1.0, rnd({3}, 3) * 0.3};
      auto fast = with_grads([&](const auto& t) { return ops::mha2nd1st_read_fused(t[0], t[1], t[2], t[3], causal); }, in);
      auto ref = with_grads([&](const auto& t) { return ops::mha2nd1st_read_covariance(t[0], t[1], t[2], t[3], causal); }, in);
      for (size_t i = 0; i < ref.size(); ++i) EXPECT_CLOSE(fast[i], ref[i], 1e-10, 1e-12) << "entry " << i;
    }
}

TEST(SecondOrderRead, LightLinearFormEqualsExplicitCovariance) {
  for (bool causal : {true, false}) {
    std::vector<torch::Tensor> in = {rnd({2, 5, 2, 3}, 4), rnd({2, 5, 2, 3}, 5), rnd({2, 5, 2, 6}, 6), rnd({2}, 7)};
    auto fast = with_grads([&](const auto& t) { return ops::light2nd1st_read_fused(t[0], t[1], t[2], 0.7, t[3], causal); }, in);
    auto ref = with_grads(
        [&](const auto& t) { return ops::light2nd1st_read_covariance(t[0], t[1], t[2], 0.7, t[3], causal); }, in);
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_CLOSE(fast[i], ref[i], 1e-10, 1e-12) << "entry " << i;
  }
  EXPECT_TRUE(testing::gradcheck(
      [](const auto& t) { return ops::light2nd1st_read_fused(t[0], t[1], t[2], 0.7, t[3], true); },
      {rnd({1, 4, 2, 3}, 8).requires_grad_(), rnd({1, 4, 2, 3}, 9).requires_grad_(), rnd({1, 4, 2, 2}, 10).requires_grad_(),
       rnd({2}, 11).requires_grad_()}));
  EXPECT_TRUE(testing::gradcheck(
      [](const auto& t) { return ops::mha2nd1st_read_fused(t[0], t[1], t[2], t[3], true); },
      {rnd({1, 4, 2, 3}, 12).requires_grad_(), rnd({1, 4, 2, 3}, 13).requires_grad_(),
       (torch::rand({2}, torch::kDouble) + 1).requires_grad_(), rnd({2}, 14).requires_grad_()}));
  // The naive twins (naive.cpp), by finite differences too.
  EXPECT_TRUE(testing::gradcheck(
      [](const auto& t) { return ops::light2nd1st_read_covariance(t[0], t[1], t[2], 0.7, t[3], true); },
      {rnd({1, 4, 2, 3}, 15).requires_grad_(), rnd({1, 4, 2, 3}, 16).requires_grad_(), rnd({1, 4, 2, 2}, 17).requires_grad_(),
       rnd({2}, 18).requires_grad_()}));
  EXPECT_TRUE(testing::gradcheck(
      [](const auto& t) { return ops::mha2nd1st_read_covariance(t[0], t[1], t[2], t[3], false); },
      {rnd({1, 4, 2, 3}, 19).requires_grad_(), rnd({1, 4, 2, 3}, 20).requires_grad_(),
       (torch::rand({2}, torch::kDouble) + 1).requires_grad_(), rnd({2}, 21).requires_grad_()}));
}

// One head: F(z) = -T log sum_i exp(-||W1 z - k_i||^2 / (2T)), z in R^d, W1 [dh, d], keys [N, dh].
struct Helmholtz {
  torch::Tensor W1, keys;
  double T;
  torch::Tensor energy(const torch::Tensor& z) const {
    auto q = torch::matmul(W1, z);
    return -T * torch::logsumexp(-(keys - q).square().sum(-1) / (2 * T), 0);
  }
};

TEST(SecondOrderRead, NewtonStepOfTheHelmholtzEnergy) {
  const int64_t d = 7, dh = 3, N = 5;
  const double T = 2.5;
  Helmholtz F{rnd({dh, d}, 20), rnd({N, dh}, 21), T};
  auto z = rnd({d}, 22).requires_grad_();
  // Autograd gradient and Hessian.
  auto grad = torch::autograd::grad({F.energy(z)}, {z}, {}, true, true)[0];
  std::vector<torch::Tensor> rows;
  for (int64_t i = 0; i < d; ++i) rows.push_back(torch::autograd::grad({grad[i]}, {z}, {}, true)[0]);
  auto hessian = torch::stack(rows).detach();
  // The paper's closed form: W1^T [I - Cov_p(k) / T] W1.
  auto q = torch::matmul(F.W1, z.detach());
  auto p = torch::softmax(-(F.keys - q).square().sum(-1) / (2 * T), 0);
  auto kbar = torch::matmul(p, F.keys);
  auto centred = F.keys - kbar;
  auto cov = torch::matmul(centred.t() * p, centred);
  auto A = torch::eye(dh, torch::kDouble) - cov / T;
  EXPECT_CLOSE(hessian, torch::matmul(F.W1.t(), torch::matmul(A, F.W1)), 1e-10, 1e-12);
  // The gradient is W1^T (q - kbar); the Newton step with the pseudo-inverse (range-space) equals the direct
  // solve M A^-1 (q - kbar) with M = W1^T (W1 W1^T)^-1.
  EXPECT_CLOSE(grad.detach(), torch::matmul(F.W1.t(), q - kbar), 1e-10, 1e-12);
  auto newton_pinv = torch::matmul(at::linalg_pinv(hessian, /*rcond=*/1e-10, /*hermitian=*/true), grad.detach());
  auto M = torch::matmul(F.W1.t(), torch::inverse(torch::matmul(F.W1, F.W1.t())));
  auto newton_solve = torch::matmul(M, at::linalg_solve(A, q - kbar));
  EXPECT_CLOSE(newton_pinv, newton_solve, 1e-8, 1e-10);
  // First-order Taylor: A^-1 ~ I + Cov/T, i.e. the MHA2nd1st read u + b with c = 1/T, mapped by M.
  auto read = ops::mha2nd1st_read_fused(q.view({1, 1, 1, dh}), F.keys.view({1, N, 1, dh}),
                                        torch::full({1}, T, torch::kDouble), torch::full({1}, 1.0 / T, torch::kDouble),
                                        /*causal=*/false)
                  .view({dh});
  auto u = q - kbar;
  EXPECT_CLOSE(read, u + torch::matmul(cov, u) / T, 1e-10, 1e-12);
}

TEST(SecondOrderRead, RejectsBadPerHeadParameters) {
  EXPECT_THROW(ops::mha2nd1st_read_fused(rnd({1, 3, 2, 4}, 1), rnd({1, 3, 2, 4}, 2), torch::ones({3}, torch::kDouble),
                                         torch::ones({2}, torch::kDouble), true),
               c10::Error);
  try {  // a tau with 3 entries for 2 heads
    ops::light2nd1st_read_fused(rnd({1, 3, 2, 4}, 1), rnd({1, 3, 2, 4}, 2), rnd({1, 3, 2, 4}, 3), 1.0,
                                torch::ones({3}, torch::kDouble), true);
    ADD_FAILURE() << "a 3-entry tau for 2 heads was accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("per-head parameters must have 2 entries"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace seqmix
