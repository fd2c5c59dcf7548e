// The Free Energy Mixer layer: reductions to its prior's plain read, padding, budgets, large inputs,
// parameter gradients and option errors. (Causality and decode == forward for every prior are in the
// mixer contract test.)
#include <gtest/gtest.h>

#include <cmath>

#include "seqmix/io/error.h"
#include "seqmix/layers/fem.h"
#include "seqmix/layers/gated_linear_attention.h"
#include "seqmix/layers/linear_attention.h"
#include "seqmix/layers/softmax_attention.h"
#include "seqmix/models/registry.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

torch::Tensor rnd(std::vector<int64_t> shape, uint64_t seed, double scale = 1.0) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randn(shape, g, torch::kDouble) * scale;
}

std::shared_ptr<FemImpl> fem(const std::string& spec, int64_t dim = 16, uint64_t seed = 3) {
  torch::manual_seed(seed);
  auto m = std::dynamic_pointer_cast<FemImpl>(build_mixer(spec, MixerContext{dim, 64}));
  m->to(torch::kDouble);
  torch::NoGradGuard no_grad;
  for (auto& p : m->named_parameters()) {
    if (p.value().dim() < 2) continue;
    if (p.value().abs().max().item<double>() == 0) p.value().normal_(0, 0.5);  // the conditioner's zero init
    else p.value().mul_(10.0);
  }
  return m;
}

std::map<std::string, torch::Tensor> params(torch::nn::Module& m) {
  std::map<std::string, torch::Tensor> out;
  for (auto& p : m.named_parameters()) out[p.key()] = p.value();
  return out;
}

// Forces lambda = sigmoid(-1e4) = 0 exactly.
void zero_lambda(FemImpl& m) {
  torch::NoGradGuard no_grad;
  m.lambda_proj->weight.zero_();
  m.lambda_proj->bias.fill_(-1e4);
}

// The ema prior (src/layers/priors/ema.cpp) starts its heads at half-lives 1 ... ema_half_life tokens, log-uniformly,
// and reads the normalised moving average sum_i gamma^(t-i) v_i / sum_i gamma^(t-i) (no conditioner, plain read).
TEST(Fem, EmaPriorStartsAtItsHalfLivesAndReadsTheNormalisedMovingAverage) {
  auto m = fem("fem:prior=ema,heads=4,ema_half_life=8,flags=", 16);
  const auto theta = params(*m).at("prior.decay_logit");
  const auto half_life = std::log(2.0) / torch::softplus(theta);
  EXPECT_CLOSE(half_life, torch::tensor({1.0, 2.0, 4.0, 8.0}, torch::kDouble), 1e-5, 1e-6);
  auto x = rnd({2, 7, 16}, 5);
  // The read by its definition: per head, weights gamma_h^(t-i) over i <= t, normalised.
  const auto v = torch::nn::functional::linear(x, m->value->weight, m->value->bias).view({2, 7, 4, -1});
  const auto log_gamma = -torch::softplus(theta);  // [H]
  const auto t = torch::arange(7, torch::kDouble);
  const auto lag = t.view({7, 1}) - t.view({1, 7});  // [t,i]
  auto w = (lag.unsqueeze(-1) * log_gamma).exp() * (lag >= 0).unsqueeze(-1);  // [t,i,H]
  w = w / w.sum(1, true);
  const auto read = torch::einsum("tih,bihd->bthd", {w, v}).flatten(2);
  const auto expected = torch::nn::functional::linear(read, m->output->weight, m->output->bias);
  EXPECT_CLOSE(m->forward(x), expected, 1e-10, 1e-12);
}

TEST(Fem, LambdaZeroWithoutGateIsThePlainReadOfEveryPrior) {
  for (const std::string& prior : fem_prior_names()) {
    SCOPED_TRACE(prior);
    auto lt = fem(std::string("fem:flags=LT,prior=") + prior);
    auto plain = fem(std::string("fem:flags=,prior=") + prior);
    auto src = params(*lt);
    {
      torch::NoGradGuard no_grad;
      for (auto& p : plain->named_parameters()) p.value().copy_(src.at(p.key()));
    }
    zero_lambda(*lt);
    auto x = rnd({2, 9, 16}, 1);
    EXPECT_CLOSE(lt->forward(x), plain->forward(x), 1e-11, 1e-12);
  }
}

TEST(Fem, SoftmaxLinearAndGlaPriorsReduceToTheBaselineMixers) {
  const int64_t D = 16, H = 2;
  auto x = rnd({2, 11, D}, 2);
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"fem:prior=softmax", "softmax:heads=2,rope=1"},
      {"fem:prior=linear", "linear:heads=2,rope=1"},
      {"fem:prior=gla", "gla:heads=2,rope=1"}};
  for (const auto& [fem_spec, baseline_spec] : pairs) {
    SCOPED_TRACE(fem_spec);
    // Full-width value path (d = D, q/k width D) so the baseline's weights fit exactly.
    auto f = fem(fem_spec + ",flags=LT,heads=2,value_dim=16,qk_dim=16", D);
    zero_lambda(*f);
    torch::manual_seed(1);
    auto base = build_mixer(baseline_spec, MixerContext{D, 64});
    base->to(torch::kDouble);
    auto fp = params(*f);
    {
      torch::NoGradGuard no_grad;
      auto bp = params(*base);
      bp.at("qkv.weight").copy_(torch::cat({fp.at("prior.query.weight"), fp.at("prior.key.weight"), fp.at("value.weight")}));
      bp.at("qkv.bias").copy_(torch::cat({fp.at("prior.query.bias"), fp.at("prior.key.bias"), fp.at("value.bias")}));
      bp.at("out.weight").copy_(fp.at("output.weight"));
      bp.at("out.bias").copy_(fp.at("output.bias"));
      if (bp.count("decay.weight")) {
        bp.at("decay.weight").copy_(fp.at("prior.decay.weight"));
        bp.at("decay.bias").copy_(fp.at("prior.decay.bias"));
      }
    }
    EXPECT_CLOSE(f->forward(x), base->forward(x), 1e-10, 1e-12);
  }
}

// FEM on every registered prior but delta (its signed weights' normaliser crosses zero: docs/fem.md), with `extra`.
std::vector<std::string> fem_on_every_prior(const std::string& extra = "") {
  std::vector<std::string> specs;
  for (const auto& prior : fem_prior_names())
    if (prior != "delta") specs.push_back("fem:prior=" + prior + extra);
  return specs;
}

TEST(Fem, PaddedPositionsLeaveTheSupport) {
  std::vector<std::string> specs = fem_on_every_prior();
  for (const char* spec : {"fem:cap=0", "fem:prior=gla,cap=0,flags=CL", "fem:causal=0", "fem:prior=linear,causal=0,cap=0",
                           // A conditioner wider than one channel (at width 16 the default d/16 = 1 channel
                           // LayerNorm outputs its bias alone), so its recurrence carries the pads' content.
                           "fem:tdc_hidden=4", "fem:cap=0,tdc_hidden=4", "fem:prior=gla,cap=0,tdc_hidden=3",
                           "fem:prior=ssm,tdc_hidden=4", "fem:causal=0,tdc_hidden=4"})
    specs.push_back(spec);
  for (const std::string& spec : specs) {
    SCOPED_TRACE(spec);
    auto m = fem(spec);
    const int64_t pads = 3, T = 8;
    auto real = rnd({2, T, 16}, 3);
    auto padded = torch::cat({rnd({2, pads, 16}, 4), real}, 1);
    auto mask = torch::cat({torch::zeros({2, pads}, torch::kBool), torch::ones({2, T}, torch::kBool)}, 1);
    auto out = m->forward_masked(padded, mask);
    EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
    // Left padding is invisible: the real tokens read as if the pads were not there.
    EXPECT_CLOSE(out.narrow(1, pads, T), m->forward(real), 1e-10, 1e-12);
    // And what the pads hold does not matter.
    auto other = padded.clone();
    other.narrow(1, 0, pads).copy_(rnd({2, pads, 16}, 5, 100.0));
    EXPECT_CLOSE(m->forward_masked(other, mask).narrow(1, pads, T), out.narrow(1, pads, T), 1e-12, 1e-13);
  }
  // A pad in the middle is skipped too (positions count real tokens): the sequence reads as if the pad
  // were cut out.
  std::vector<std::string> gap_specs = fem_on_every_prior();
  gap_specs.insert(gap_specs.end(), {"fem:cap=0", "fem:prior=linear,causal=0"});
  for (const std::string& spec : gap_specs) {
    SCOPED_TRACE(spec);
    auto m = fem(spec);
    auto real = rnd({2, 8, 16}, 3);
    auto gap_mask = torch::ones({2, 8}, torch::kBool);
    gap_mask.index_put_({torch::indexing::Slice(), 4}, false);
    auto keep = torch::tensor(std::vector<int64_t>{0, 1, 2, 3, 5, 6, 7});
    EXPECT_CLOSE(m->forward_masked(real, gap_mask).index_select(1, keep), m->forward(real.index_select(1, keep)),
                 1e-10, 1e-12);
  }
  EXPECT_THROW(fem("fem")->forward_masked(rnd({1, 4, 16}, 6), torch::ones({1, 4}, torch::kLong)), c10::Error);
}

int64_t tdc_parameters(int64_t D, int64_t hidden, int64_t out) {
  return 2 * D + 3 * (D * hidden + hidden) + 2 * hidden + hidden * out;
}

TEST(Fem, BudgetsMatchFourDSquaredPlusBiases) {
  for (const auto& [budget, D] : std::vector<std::pair<std::string, int64_t>>{{"i", 128}, {"ii", 96}}) {
    SCOPED_TRACE(budget);
    torch::manual_seed(0);
    auto m = std::dynamic_pointer_cast<FemImpl>(build_mixer("fem:budget=" + budget, MixerContext{D, 64}));
    const int64_t d = m->widths().value, qk = m->widths().qk;
    EXPECT_EQ(d, budget == "i" ? D / 2 : 2 * D / 3);
    EXPECT_EQ(4 * D * d + D * 2 * qk, 4 * D * D) << "the paper's 4Dd + Ddr";
    const int64_t biases = d /*value*/ + D /*output*/ + d /*lambda*/ + d /*gate*/ + 2 * qk /*q, k*/;
    const int64_t beta = d;
    const int64_t hidden = d / 16, modulation = d + 2 * qk + d + d;
    int64_t count = 0;
    for (const auto& p : m->parameters()) count += p.numel();
    EXPECT_EQ(count, 4 * D * D + biases + beta + tdc_parameters(D, hidden, modulation));
    // Without the conditioner: exactly 4D^2 plus biases and beta.
    auto no_c = build_mixer("fem:flags=LTG,budget=" + budget, MixerContext{D, 64});
    count = 0;
    for (const auto& p : no_c->parameters()) count += p.numel();
    EXPECT_EQ(count, 4 * D * D + biases + beta);
  }
}

TEST(Fem, BetaStartsAtSoftplusOfTheOffsetAndLearnsThroughSoftplus) {
  auto m = fem("fem:flags=LT");
  EXPECT_CLOSE(m->beta(), torch::full({8}, std::log1p(std::exp(1.8)), torch::kDouble), 1e-12, 0);
  // Finite differences on beta_param and the lambda projection against autograd.
  auto x = rnd({1, 6, 16}, 7);
  auto w = rnd({1, 6, 16}, 8);
  auto loss = [&] { return (m->forward(x) * w).sum(); };
  m->zero_grad();
  loss().backward();
  for (auto* p : {&m->beta_param, &m->lambda_proj->bias}) {
    auto grad = p->grad().clone();
    for (int64_t i = 0; i < p->numel(); i += 3) {
      torch::NoGradGuard no_grad;
      const double h = 1e-6, old = p->view(-1)[i].item<double>();
      p->view(-1)[i] = old + h;
      const double up = loss().item<double>();
      p->view(-1)[i] = old - h;
      const double down = loss().item<double>();
      p->view(-1)[i] = old;
      EXPECT_NEAR(grad.view(-1)[i].item<double>(), (up - down) / (2 * h), 1e-6 * (1 + std::abs((up - down) / (2 * h))));
    }
  }
}

TEST(Fem, LargeInputsGiveFiniteOutputsAndGradients) {
  for (const std::string& spec : fem_on_every_prior(",heads=2")) {
    SCOPED_TRACE(spec);
    torch::manual_seed(0);
    auto m = build_mixer(spec, MixerContext{16, 4096});
    // Inputs scaled so the values W_v x are of magnitude ~1e3.
    auto x = (torch::randn({1, 4096, 16}) * 1e4).requires_grad_();
    auto y = m->forward(x);
    EXPECT_TRUE(torch::isfinite(y).all().item<bool>());
    y.square().mean().backward();
    EXPECT_TRUE(torch::isfinite(x.grad()).all().item<bool>());
    for (const auto& p : m->parameters())
      if (p.grad().defined()) EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>());
  }
  // Without the cap (running maxima), at a shorter length (the streaming path is sequential).
  torch::manual_seed(0);
  auto m = build_mixer("fem:cap=0,heads=2,prior=gla", MixerContext{16, 512});
  auto x = (torch::randn({1, 512, 16}) * 1e4).requires_grad_();
  auto y = m->forward(x);
  EXPECT_TRUE(torch::isfinite(y).all().item<bool>());
  y.square().mean().backward();
  EXPECT_TRUE(torch::isfinite(x.grad()).all().item<bool>());
}

TEST(Fem, OptionErrorsNameTheProblem) {
  auto message = [](const std::string& spec) {
    try {
      build_mixer(spec, MixerContext{16, 8});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message("fem:flags=CLX").find("unknown flag 'X'"), std::string::npos);
  EXPECT_NE(message("fem:flags=T").find("T (temperature learning) needs L"), std::string::npos);
  EXPECT_NE(message("fem:prior=gla,causal=0").find("causal only"), std::string::npos);
  EXPECT_NE(message("fem:prior=aft,rope=1").find("no queries or keys"), std::string::npos);
  EXPECT_NE(message("fem:prior=mamba").find("must be one of softmax, linear, gla, aft, lrnn_decay, ssm"), std::string::npos);
  EXPECT_NE(message("fem:cap=50").find("<= 43"), std::string::npos);
  EXPECT_NE(message("fem:heads=3,value_dim=10").find("not divisible"), std::string::npos);
}

TEST(Fem, ProbeReadsRawValuesWithoutProjections) {
  auto m = std::dynamic_pointer_cast<FemImpl>(build_mixer("fem:flags=LT", MixerContext{16, 8, true}));
  EXPECT_FALSE(m->value);
  EXPECT_FALSE(m->output);
  EXPECT_EQ(m->widths().value, 16);
  EXPECT_THROW(build_mixer("gla", MixerContext{16, 8, true}), Error);
}

}  // namespace
}  // namespace seqmix
