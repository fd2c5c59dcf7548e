// MomenMHA / NagMHA residual schemes: the unrolled closed forms of the energy paper (§3.1) over L = 3
// sublayers, the reduction to the pre-norm residual at beta = 0, eta = 1, decoding with the momentum
// threaded per token, and gradients reaching beta and eta.
#include <gtest/gtest.h>

#include "seqmix/io/error.h"
#include "seqmix/models/language_model.h"
#include "seqmix/models/registry.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

// Three blocks with one sublayer each, f_k(z) = tanh(z W_k): each records the input it saw and its output.
struct Recorder {
  std::vector<torch::Tensor> weights, inputs, outputs;
  explicit Recorder(int64_t n, int64_t dim) {
    for (int64_t k = 0; k < n; ++k) weights.push_back(torch::randn({dim, dim}, torch::kDouble) * 0.7);
  }
  std::vector<BlockSublayers> blocks(int64_t zero_last = -1) {
    std::vector<BlockSublayers> out;
    for (size_t k = 0; k < weights.size(); ++k) {
      BlockSublayers b;
      b.mixer = [this, k, zero_last](const torch::Tensor& z) {
        inputs.push_back(z);
        auto f = static_cast<int64_t>(k) == zero_last ? torch::zeros_like(z) : torch::tanh(torch::matmul(z, weights[k]));
        outputs.push_back(f);
        return f;
      };
      out.push_back(b);
    }
    return out;
  }
};

// The weight of f^(k) in z^(L): eta sum_{n=0}^{L-1-k} beta^n.
double skip_weight(int64_t L, int64_t k, double beta, double eta) {
  double w = 0;
  for (int64_t n = 0; n <= L - 1 - k; ++n) w += eta * std::pow(beta, n);
  return w;
}

ResidualScheme scheme(const std::string& spec, int64_t sublayers) {
  auto r = build_residual(spec, sublayers, /*sublayers_per_block=*/1);
  r->to(torch::kDouble);
  return r;
}

TEST(MomentumResidual, MomenMHAUnrollsToWeightedSkipConnections) {
  const double beta = 0.75, eta = 1.25;  // exact in float32, the parameters' initial dtype
  const int64_t L = 3;
  torch::manual_seed(0);
  Recorder rec(L, 5);
  auto z0 = torch::randn({2, 4, 5}, torch::kDouble);
  auto zL = scheme("momentum:beta=0.75,eta=1.25,learn=0,share=global", L)->forward(z0, rec.blocks());
  // z^(L) = z^(0) + sum_k (eta sum_{n=0}^{L-1-k} beta^n) f^(k)
  auto expected = z0.clone();
  for (int64_t k = 0; k < L; ++k) expected = expected + skip_weight(L, k, beta, eta) * rec.outputs[k];
  EXPECT_CLOSE(zL, expected, 1e-12, 1e-12);
}

TEST(MomentumResidual, NagMHAUnrollsToItsLookAheadWeights) {
  const double beta = 0.625, eta = 0.875;
  const int64_t L = 3;
  torch::manual_seed(1);
  auto z0 = torch::randn({2, 4, 5}, torch::kDouble);
  const std::string spec = "nesterov:beta=0.625,eta=0.875,learn=0,share=global";
  Recorder rec(L, 5);
  auto zL = scheme(spec, L)->forward(z0, rec.blocks());
  // z^(L) = z^(0) + sum_k (eta sum_{n=0}^{L-1-k} beta^n) f~^(k), f~^(k) evaluated at the look-ahead.
  auto expected = z0.clone();
  for (int64_t k = 0; k < L; ++k) expected = expected + skip_weight(L, k, beta, eta) * rec.outputs[k];
  EXPECT_CLOSE(zL, expected, 1e-12, 1e-12);
  // z~^(L) = z^(0) + sum_k (eta sum_n beta^n + beta^(L-k)) f~^(k): the input a fourth sublayer sees.
  Recorder rec4(L + 1, 5);
  for (int64_t k = 0; k < L; ++k) rec4.weights[k] = rec.weights[k];
  scheme(spec, L + 1)->forward(z0, rec4.blocks(/*zero_last=*/L));
  auto lookahead = z0.clone();
  for (int64_t k = 0; k < L; ++k)
    lookahead = lookahead + (skip_weight(L, k, beta, eta) + std::pow(beta, L - k)) * rec4.outputs[k];
  EXPECT_CLOSE(rec4.inputs[L], lookahead, 1e-12, 1e-12);
}

LanguageModelOptions small(const std::string& residual) {
  LanguageModelOptions o;
  o.vocab_size = 11;
  o.dim = 16;
  o.layers = 3;
  o.mixers = {"softmax:heads=2"};
  o.max_len = 32;
  o.residual = residual;
  return o;
}

TEST(MomentumResidual, BetaZeroEtaOneIsThePreNormResidual) {
  auto tokens = torch::randint(0, 11, {2, 7}, torch::kLong);
  for (const std::string spec : {"momentum:beta=0,eta=1", "nesterov:beta=0,eta=1"}) {
    torch::manual_seed(5);
    LanguageModel a(small("prenorm"));
    torch::manual_seed(5);
    LanguageModel b(small(spec));
    a->to(torch::kDouble);
    b->to(torch::kDouble);
    EXPECT_CLOSE(b->forward(tokens), a->forward(tokens), 1e-12, 1e-12) << spec;
  }
}

TEST(MomentumResidual, DecodingEqualsTheFullForwardAndBetaEtaLearn) {
  for (const std::string spec : {"momentum", "nesterov", "momentum:norm=post,share=layer", "nesterov:share=global"}) {
    SCOPED_TRACE(spec);
    torch::manual_seed(2);
    LanguageModel m(small(spec));
    m->to(torch::kDouble);
    auto tokens = torch::randint(0, 11, {2, 9}, torch::kLong);
    auto full = m->forward(tokens);
    full.sum().backward();
    // Every coefficient gets a gradient, except the first sublayer's beta with one pair per sublayer
    // (it multiplies m = 0).
    const bool per_sublayer = spec.find("share=") == std::string::npos;
    for (const char* name : {"residual.beta", "residual.eta"}) {
      auto grad = m->named_parameters()[name].grad();
      ASSERT_TRUE(grad.defined()) << name;
      for (int64_t i = 0; i < grad.numel(); ++i) {
        if (per_sublayer && i == 0 && std::string(name) == "residual.beta") EXPECT_EQ(grad[i].item<double>(), 0.0);
        else EXPECT_NE(grad[i].item<double>(), 0.0) << name << "[" << i << "]";
      }
    }
    torch::NoGradGuard no_grad;
    auto state = m->init_state(2);
    EXPECT_CLOSE(m->prefill(tokens.narrow(1, 0, 4), state), full.narrow(1, 0, 4), 1e-10, 1e-12);
    for (int64_t t = 4; t < 9; ++t) EXPECT_CLOSE(m->step(tokens.select(1, t), state), full.select(1, t), 1e-10, 1e-12);
    // Changing token 5 leaves earlier outputs bit-identical.
    auto changed = tokens.clone();
    changed.select(1, 5).fill_(3);
    changed.select(1, 5).add_(tokens.select(1, 5) == 3);
    EXPECT_TRUE(torch::equal(m->forward(changed).narrow(1, 0, 5), full.narrow(1, 0, 5).detach()));
  }
}

TEST(MomentumResidual, FiniteDifferenceGradientsOfInputBetaAndEta) {
  for (const std::string spec : {"momentum:share=global", "nesterov:share=global"}) {
    SCOPED_TRACE(spec);
    auto r = scheme(spec, 3);
    torch::manual_seed(4);
    Recorder rec(3, 4);
    auto blocks = rec.blocks();
    auto x = torch::randn({1, 3, 4}, torch::kDouble);
    auto w = torch::randn({1, 3, 4}, torch::kDouble);
    EXPECT_TRUE(testing::gradcheck([&](const std::vector<torch::Tensor>& t) { return r->forward(t[0], blocks); },
                                   {x.clone().requires_grad_()}));
    auto loss = [&] { return (r->forward(x, blocks) * w).sum(); };
    loss().backward();
    for (const char* name : {"beta", "eta"}) {
      auto p = r->named_parameters()[name];
      const double analytic = p.grad()[0].item<double>(), eps = 1e-6;
      double plus, minus;
      {
        torch::NoGradGuard no_grad;
        p.add_(eps);
        plus = loss().item<double>();
        p.sub_(2 * eps);
        minus = loss().item<double>();
        p.add_(eps);
      }
      EXPECT_NEAR(analytic, (plus - minus) / (2 * eps), 1e-6 * std::max(1.0, std::abs(analytic))) << name;
    }
  }
}

TEST(MomentumResidual, SharingSetsTheNumberOfCoefficients) {
  EXPECT_EQ(build_residual("momentum", 3)->parameters().size(), 2u);
  EXPECT_EQ(build_residual("momentum", 3)->named_parameters()["beta"].numel(), 6);
  EXPECT_EQ(build_residual("momentum", 3, 1)->named_parameters()["beta"].numel(), 3);  // no channel mixers
  EXPECT_EQ(build_residual("momentum:share=layer", 3)->named_parameters()["beta"].numel(), 3);
  EXPECT_EQ(build_residual("momentum:share=layer", 3, 1)->named_parameters()["beta"].numel(), 3);
  EXPECT_EQ(build_residual("nesterov:share=global", 3)->named_parameters()["eta"].numel(), 1);
  EXPECT_EQ(build_residual("momentum:learn=0", 3)->parameters().size(), 0u);
  EXPECT_THROW(build_residual("momentum:share=head", 3), Error);
}

}  // namespace
}  // namespace seqmix
