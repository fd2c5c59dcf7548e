// Exact Linear Attention: each kernel's matrix against its closed form, the linear form against the
// explicit quadratic form (causal and bidirectional, fp64 and fp32, large and adversarial inputs), the
// fused scan's gradients against the naive twin's, finite differences of the naive op, non-negativity of
// every kernel, the fixed-size decode state, and user-defined kernels.
#include <gtest/gtest.h>

#include "seqmix/ops/ela.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

constexpr auto rnd = &testing::seeded_randn;
const std::vector<std::string> kBuiltin = {"hadamard_exp", "sum_sq_euclidean", "sub_sq_euclidean",
                                           "direction_magnitude"};

// k(q_t, k_j) straight from its definition, [B,H,T,S] (log k for hadamard_exp).
torch::Tensor closed_form(const std::string& name, const torch::Tensor& q, const torch::Tensor& k) {
  auto qh = q.permute({0, 2, 1, 3}).unsqueeze(3), kh = k.permute({0, 2, 1, 3}).unsqueeze(2);  // [B,H,T,1,d]
  if (name == "hadamard_exp") return torch::logsumexp(qh + kh, -1);
  if (name == "sum_sq_euclidean") return (qh + kh).pow(2).sum(-1);
  if (name == "sub_sq_euclidean") return (qh - kh).pow(2).sum(-1);
  auto qn = qh.pow(2).sum(-1).add(1e-12).sqrt(), kn = kh.pow(2).sum(-1).add(1e-12).sqrt();
  return 1.0 + qn * kn + (qh * kh).sum(-1);  // direction_magnitude
}

TEST(ElaKernels, MatricesEqualTheirClosedForms) {
  auto q = rnd({2, 7, 3, 5}, 1), k = rnd({2, 9, 3, 5}, 2);
  for (const auto& name : kBuiltin) {
    SCOPED_TRACE(name);
    EXPECT_CLOSE(ops::ela_kernel_matrix(q, k, ops::exact_kernel(name)), closed_form(name, q, k), 1e-12, 1e-12);
  }
}

// Inputs on which a kernel is most likely to go negative: q = k, q = -k, zero rows, huge and tiny norms.
std::vector<std::pair<torch::Tensor, torch::Tensor>> adversarial_pairs() {
  auto base = rnd({1, 16, 2, 6}, 3);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs = {
      {base, base}, {base, -base}, {base * 1e3, -base * 1e3}, {base * 1e-4, -base},
      {torch::zeros_like(base), base}, {base, torch::zeros_like(base)}};
  for (uint64_t seed = 10; seed < 30; ++seed) pairs.push_back({rnd({1, 16, 2, 6}, seed) * (seed % 5 + 0.1),
                                                              rnd({1, 16, 2, 6}, seed + 100) * (seed % 7 + 0.1)});
  return pairs;
}

TEST(ElaKernels, EveryKernelIsNonNegative) {
  for (const auto& name : kBuiltin) {
    const auto& kernel = ops::exact_kernel(name);
    for (const auto& [q, k] : adversarial_pairs()) {
      auto matrix = ops::ela_kernel_matrix(q, k, kernel);
      if (kernel.exponential) {  // log k: finite means k = exp(log k) > 0
        EXPECT_TRUE(torch::isfinite(matrix).all().item<bool>()) << name;
        continue;
      }
      // Through the features the squared distances cancel (|q|^2 + |k|^2 - 2 q.k); allow rounding of
      // those terms and nothing more.
      auto magnitude = closed_form("sum_sq_euclidean", q, k) + closed_form("sub_sq_euclidean", q, k) + 1.0;
      EXPECT_TRUE((matrix >= -1e-13 * magnitude).all().item<bool>())
          << name << " went negative: min " << matrix.min().item<double>();
      EXPECT_TRUE((closed_form(name, q, k) >= 0).all().item<bool>()) << name;
    }
  }
}

// The linear form (fp64, then fp32) against the explicit quadratic form in fp64.
void expect_linear_equals_quadratic(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const std::string& name, bool causal) {
  SCOPED_TRACE(name + (causal ? " causal" : " bidirectional"));
  const auto& kernel = ops::exact_kernel(name);
  auto reference = ops::ela_naive(q, k, v, kernel, causal);
  const double scale = reference.abs().max().item<double>() + 1e-30;
  EXPECT_CLOSE(ops::ela_fused(q, k, v, kernel, causal), reference, 1e-12, 1e-12 * scale);
  auto fp32 = ops::ela_fused(q.to(torch::kFloat), k.to(torch::kFloat), v.to(torch::kFloat), kernel, causal);
  EXPECT_CLOSE(fp32.to(torch::kDouble), reference, 1e-5, 1e-5 * scale);
}

TEST(ElaExactness, LinearFormEqualsQuadraticFormForEveryKernel) {
  for (const auto& name : kBuiltin)
    for (bool causal : {true, false}) {
      expect_linear_equals_quadratic(rnd({2, 70, 3, 5}, 40), rnd({2, 70, 3, 5}, 41), rnd({2, 70, 3, 4}, 42), name,
                                     causal);
    }
}

TEST(ElaExactness, HoldsForLargeNorms) {
  // Entries of size ~30 (norms ~70): exp(q + k) reaches e^200, beyond fp32 and close to fp64's range
  // edge once summed; the shifted linear form must still match. The polynomial kernels reach ~1e4.
  for (const auto& name : kBuiltin)
    for (bool causal : {true, false}) {
      const double s = name == "hadamard_exp" ? 30.0 : 1e2;
      expect_linear_equals_quadratic(rnd({1, 65, 2, 6}, 50) * s, rnd({1, 65, 2, 6}, 51) * s, rnd({1, 65, 2, 3}, 52),
                                     name, causal);
    }
}

TEST(ElaExactness, HadamardSurvivesChannelsOfOppositeScale) {
  // Each query's mass sits in the one channel where the keys are small, and the keys' mass in the other:
  // a single shared shift would underflow every term of the row, the per-channel shifts keep them.
  const int64_t T = 9;
  auto q = torch::zeros({1, T, 1, 2}, torch::kDouble), k = torch::zeros({1, T, 1, 2}, torch::kDouble);
  q.select(3, 0).fill_(120.0);
  k.select(3, 1).copy_(torch::linspace(100.0, 140.0, T, torch::kDouble).view({1, T, 1}));
  q.select(3, 1).fill_(-50.0);
  auto v = rnd({1, T, 1, 3}, 53);
  expect_linear_equals_quadratic(q, k, v, "hadamard_exp", true);
  expect_linear_equals_quadratic(q, k, v, "hadamard_exp", false);
}

// Fused (fp64, fp32) against naive (fp64): the output and the gradients of q, k, v.
void expect_twins(int64_t B, int64_t T, int64_t H, int64_t dk, int64_t dv, const std::string& name, bool causal,
                  uint64_t seed) {
  SCOPED_TRACE(name + " T" + std::to_string(T) + " dk" + std::to_string(dk) + (causal ? " causal" : " bidir"));
  const auto& kernel = ops::exact_kernel(name);
  std::vector<torch::Tensor> inputs = {rnd({B, T, H, dk}, seed), rnd({B, T, H, dk}, seed + 1),
                                       rnd({B, T, H, dv}, seed + 2)};
  auto grad = rnd({B, T, H, dv}, seed + 3);
  auto run = [&](bool fused, torch::ScalarType type) {
    std::vector<torch::Tensor> leaves;
    for (const auto& t : inputs) leaves.push_back(t.to(type).detach().clone().requires_grad_());
    auto y = fused ? ops::ela_fused(leaves[0], leaves[1], leaves[2], kernel, causal)
                   : ops::ela_naive(leaves[0], leaves[1], leaves[2], kernel, causal);
    y.backward(grad.to(type));
    return std::vector<torch::Tensor>{y, leaves[0].grad(), leaves[1].grad(), leaves[2].grad()};
  };
  testing::TwinTolerances tolerances;
  tolerances.scale_atol = true;
  testing::expect_twins_close(run(false, torch::kDouble), run(true, torch::kDouble), run(true, torch::kFloat),
                              {"y", "dq", "dk", "dv"}, tolerances);
}

TEST(ElaFused, OutputsAndGradientsMatchTheNaiveTwinOnAwkwardShapes) {
  uint64_t seed = 100;
  for (int64_t T : {1, 2, 63, 64, 65, 257}) {
    const int64_t B = T >= 257 ? 1 : 2;
    for (const auto& name : kBuiltin) {
      seed += 4;
      expect_twins(B, T, 2, T == 65 ? 3 : 5, T == 63 ? 1 : 4, name, true, seed);
      if (T <= 65) expect_twins(B, T, 1, 5, 3, name, false, seed + 1000);
    }
  }
}

TEST(ElaNaive, FiniteDifferenceGradients) {
  for (const auto& name : kBuiltin)
    for (bool causal : {true, false}) {
      SCOPED_TRACE(name);
      const auto& kernel = ops::exact_kernel(name);
      EXPECT_TRUE(testing::gradcheck(
          [&](const std::vector<torch::Tensor>& x) { return ops::ela_naive(x[0], x[1], x[2], kernel, causal); },
          {rnd({1, 5, 2, 3}, 60).requires_grad_(), rnd({1, 5, 2, 3}, 61).requires_grad_(),
           rnd({1, 5, 2, 2}, 62).requires_grad_()}));
    }
}

TEST(ElaWeights, RowsSumToOneAndCausalRowsIgnoreTheFuture) {
  auto q = rnd({1, 6, 2, 4}, 70), k = rnd({1, 6, 2, 4}, 71);
  for (const auto& name : kBuiltin) {
    auto w = ops::ela_attention_weights(q, k, ops::exact_kernel(name), true);
    EXPECT_CLOSE(w.sum(-1), torch::ones({1, 2, 6}, torch::kDouble), 1e-12, 1e-12) << name;
    EXPECT_EQ(w.triu(1).abs().max().item<double>(), 0.0) << name;
    EXPECT_TRUE((w >= 0).all().item<bool>()) << name;
  }
}

// A fresh ElaState of q's dtype from ops::ela_initial_state, key_max undefined for the kernels without one.
ops::ElaState fresh_state(int64_t batch, int64_t heads, int64_t dk, int64_t dv, const ops::ExactKernel& kernel,
                          const torch::Tensor& q) {
  const auto s = ops::ela_initial_state(batch, heads, dk, dv, {.kernel = kernel.name, .dtype = q.scalar_type()});
  return {s.kv, s.k_sum, s.key_max.numel() == 0 ? torch::Tensor() : s.key_max};
}

// One ops::ela_step on an ElaState, whose key_max is undefined for the kernels without one (the op takes and returns
// it empty, [0]); returns y_t and updates the state.
torch::Tensor step(const torch::Tensor& q_t, const torch::Tensor& k_t, const torch::Tensor& v_t,
                   const ops::ExactKernel& kernel, ops::ElaState& state) {
  const auto key_max = state.key_max.defined() ? state.key_max : torch::empty({0}, state.kv.options());
  const auto r = ops::ela_step(q_t, k_t, v_t, state.kv, state.k_sum, key_max, {.kernel = kernel.name});
  state = {r.kv, r.k_sum, r.key_max.numel() == 0 ? torch::Tensor() : r.key_max};
  return r.y;
}

// Steps a (B=1, H=1) state through x.size(1) tokens; returns the last output and the state.
std::pair<torch::Tensor, ops::ElaState> decode(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                               const ops::ExactKernel& kernel) {
  auto state = fresh_state(q.size(0), q.size(2), q.size(3), v.size(3), kernel, q);
  torch::Tensor y;
  for (int64_t t = 0; t < q.size(1); ++t) y = step(q.select(1, t), k.select(1, t), v.select(1, t), kernel, state);
  return {y, state};
}

TEST(ElaDecode, StepsEqualTheForward) {
  for (const auto& name : kBuiltin) {
    SCOPED_TRACE(name);
    const auto& kernel = ops::exact_kernel(name);
    auto q = rnd({2, 12, 3, 4}, 80) * 3, k = rnd({2, 12, 3, 4}, 81) * 3, v = rnd({2, 12, 3, 5}, 82);
    auto full = ops::ela_fused(q, k, v, kernel, true);
    auto state = fresh_state(2, 3, 4, 5, kernel, q);
    for (int64_t t = 0; t < 12; ++t)
      EXPECT_CLOSE(step(q.select(1, t), k.select(1, t), v.select(1, t), kernel, state), full.select(1, t), 1e-11,
                   1e-12);
  }
}

std::vector<int64_t> state_sizes(const ops::ElaState& s) {
  std::vector<int64_t> sizes;
  for (const auto& t : {s.kv, s.k_sum, s.key_max})
    if (t.defined()) sizes.push_back(t.numel());
  return sizes;
}

TEST(ElaDecode, StateSizeDoesNotGrowWithLength) {
  for (const std::string name : {"hadamard_exp", "sum_sq_euclidean"}) {
    SCOPED_TRACE(name);
    const auto& kernel = ops::exact_kernel(name);
    auto q = rnd({1, 65536, 1, 2}, 90), k = rnd({1, 65536, 1, 2}, 91), v = rnd({1, 65536, 1, 2}, 92);
    auto short_run = decode(q.narrow(1, 0, 16), k.narrow(1, 0, 16), v.narrow(1, 0, 16), kernel);
    auto long_run = decode(q, k, v, kernel);
    EXPECT_EQ(state_sizes(short_run.second), state_sizes(long_run.second));
    EXPECT_CLOSE(short_run.first, ops::ela_fused(q.narrow(1, 0, 16), k.narrow(1, 0, 16), v.narrow(1, 0, 16), kernel,
                                                 true).select(1, 15), 1e-11, 1e-12);
    EXPECT_CLOSE(long_run.first, ops::ela_fused(q, k, v, kernel, true).select(1, 65535), 1e-9, 1e-11);
  }
}

TEST(ElaKernels, UserKernelsRegisterAndAreChecked) {
  static bool registered = false;
  if (!registered) {
    ops::register_exact_kernel(
        "test_relu_dot", "relu(q).relu(k) + 1e-3 features",
        [](const torch::Tensor& q) { return torch::relu(q) + 1e-3; },
        [](const torch::Tensor& k) { return torch::relu(k) + 1e-3; });
    ops::register_exact_kernel("test_signed_dot", "q.k (can be negative)", [](const torch::Tensor& q) { return q; },
                               [](const torch::Tensor& k) { return k; });
    registered = true;
  }
  const auto names = ops::exact_kernel_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "test_relu_dot"), names.end());
  expect_linear_equals_quadratic(rnd({1, 20, 2, 3}, 95), rnd({1, 20, 2, 3}, 96), rnd({1, 20, 2, 2}, 97),
                                 "test_relu_dot", true);
  EXPECT_THROW(ops::register_exact_kernel("test_relu_dot", "again", [](const torch::Tensor& q) { return q; },
                                          [](const torch::Tensor& k) { return k; }),
               std::exception);
  EXPECT_THROW(ops::register_exact_kernel("test_no_maps", "", nullptr, nullptr), std::exception);
  // q.k with q = -k makes every causal row sum negative: refused, not divided by.
  auto q = rnd({1, 8, 1, 3}, 98).abs() + 0.1;
  const auto& signed_dot = ops::exact_kernel("test_signed_dot");
  EXPECT_THROW(ops::ela_fused(q, -q, q, signed_dot, true), std::exception);
  EXPECT_THROW(ops::ela_naive(q, -q, q, signed_dot, true), std::exception);
  try {
    ops::exact_kernel("nope");
    ADD_FAILURE() << "unknown kernel accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("hadamard_exp"), std::string::npos) << e.what();
  }
}

TEST(ElaOps, RejectWrongShapes) {
  const auto& kernel = ops::exact_kernel("hadamard_exp");
  auto q = rnd({1, 4, 2, 3}, 1);
  EXPECT_THROW(ops::ela_fused(q, rnd({1, 5, 2, 3}, 2), rnd({1, 4, 2, 3}, 3), kernel, true), std::exception);
  EXPECT_THROW(ops::ela_fused(q, q, rnd({1, 4, 3, 3}, 3), kernel, true), std::exception);
  EXPECT_THROW(ops::ela_naive(q.select(0, 0), q, q, kernel, true), std::exception);
}

}  // namespace
}  // namespace seqmix
