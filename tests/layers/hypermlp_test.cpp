// HyperMLP / HyperGLU as layers: the label grammar, every Table 1 label built from its label alone, the
// matched parameter budgets, the truncation invariance of the lag layout (paper Theorem 2.3) and its failure
// in the forward layout, and the registry's errors. Causality, decode and gradients are in the mixer
// contract test; the blocked read against the dense formula in tests/ops/hypermlp_read_test.cpp.
#include <gtest/gtest.h>

#include <sstream>

#include "seqmix/io/error.h"
#include "seqmix/layers/hypermlp.h"
#include "seqmix/models/registry.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

std::shared_ptr<HyperMlpImpl> build(const std::string& spec, int64_t dim, int64_t max_len) {
  auto m = std::dynamic_pointer_cast<HyperMlpImpl>(build_mixer(spec, MixerContext{dim, max_len}));
  EXPECT_TRUE(m) << spec << " did not build a HyperMLP layer";
  return m;
}

std::string error_of(const std::string& spec, int64_t dim, int64_t max_len) {
  try {
    build_mixer(spec, MixerContext{dim, max_len});
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

int64_t parameter_count(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.named_parameters())
    if (p.key().rfind("conv_", 0) != 0) n += p.value().numel();
  return n;
}

TEST(HyperVariant, ParsesEveryPart) {
  auto v = HyperVariant::parse("G-pcg-q-12o");
  EXPECT_EQ(v.base, 'G');
  EXPECT_TRUE(v.rope && v.conv && v.gates && v.mix_before && v.mix_after && v.lag);
  EXPECT_EQ(v.budget, HyperVariant::Budget::match_qk);
  v = HyperVariant::parse("R-2!");
  EXPECT_TRUE(!v.rope && !v.conv && !v.gates && !v.mix_before && v.mix_after && !v.lag);
  EXPECT_EQ(v.budget, HyperVariant::Budget::over);
  v = HyperVariant::parse("S-c-v");
  EXPECT_EQ(v.budget, HyperVariant::Budget::match_vo);
  EXPECT_FALSE(v.mixes());
  v = HyperVariant::parse("S");
  EXPECT_EQ(v.budget, HyperVariant::Budget::full);
}

TEST(HyperVariant, RejectsMalformedLabelsWithTheGrammar) {
  for (const std::string bad : {"", "X", "RR", "R-", "R-gc", "R-pp", "R-q-v", "R-12-q", "R-3", "R-12oo", "R-q!",
                                "R-cg-12o", "R-12o", "R-x", "R--q"}) {
    try {
      HyperVariant::parse(bad);
      ADD_FAILURE() << "'" << bad << "' parsed";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("variant '" + bad + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("Base[-Feat][-Rank][-Mix][!]"), std::string::npos) << what;
    }
  }
}

TEST(HyperVariant, EveryTable1LabelBuildsAndRuns) {
  // Width 384 and 64 positions: every matched label has room for its temporal mixing.
  for (const auto& [label, title] : hyper_table1_labels()) {
    SCOPED_TRACE(label);
    const std::string spec = std::string(label[0] == 'G' ? "hyperglu" : "hypermlp") + ":variant=" + label;
    auto m = build(spec, 384, 64);
    ASSERT_TRUE(m);
    torch::NoGradGuard no_grad;
    auto y = m->forward(torch::randn({2, 20, 384}));
    EXPECT_EQ(y.sizes(), (at::IntArrayRef{2, 20, 384}));
    EXPECT_TRUE(torch::isfinite(y).all().item<bool>());
    EXPECT_GT(y.abs().max().item<double>(), 0.0);
  }
  EXPECT_EQ(hyper_table1_labels().size(), 33u);
}

TEST(HyperVariant, ParameterCountFormulaMatchesTheModule) {
  for (const std::string spec : {"hypermlp", "hyperglu", "hypermlp:variant=R-pcg-12o!,bias=1", "hypermlp:variant=S-c-v",
                                 "hyperglu:variant=G-2o!,mix_rank=3", "hypermlp:variant=R-1o!,qk_rank=64,vo_rank=32"}) {
    auto m = build(spec, 384, 64);
    ASSERT_TRUE(m);
    EXPECT_EQ(parameter_count(*m), m->ranks().parameters) << spec;
  }
}

TEST(HyperVariant, MatchedLabelsHaveSoftmaxAttentionsParameterCountWithinOnePercent) {
  // At the paper's GPT-2 small shape (d 768, 1024 positions) and at a smaller one; the convs aside.
  for (auto [dim, max_len] : {std::pair<int64_t, int64_t>{768, 1024}, {384, 64}})
    for (const auto& [label, title] : hyper_table1_labels()) {
      const auto v = HyperVariant::parse(label);
      const bool matched = v.budget == HyperVariant::Budget::match_qk || v.budget == HyperVariant::Budget::match_vo;
      if (!matched && v.budget != HyperVariant::Budget::full) continue;
      auto m = build(std::string(label[0] == 'G' ? "hyperglu" : "hypermlp") + ":variant=" + label, dim, max_len);
      ASSERT_TRUE(m);
      const double budget = 4.0 * dim * dim;
      EXPECT_LE(parameter_count(*m), budget) << label << " at d=" << dim;
      EXPECT_GE(parameter_count(*m), 0.99 * budget) << label << " at d=" << dim;
    }
  auto hyperglu = build("hyperglu", 768, 1024);
  EXPECT_EQ(hyperglu->ranks().vo_rank, 768);
  EXPECT_LT(hyperglu->ranks().qk_rank, 768 / 4);  // the QK side pays for the mixing
  EXPECT_EQ(hyperglu->ranks().qk_rank, 132);      // the numbers docs/hypermlp.md quotes
  EXPECT_EQ(parameter_count(*hyperglu), 2351076);
  auto over = build("hyperglu:variant=G-c-12o!", 768, 1024);
  EXPECT_GT(parameter_count(*over), 4 * 768 * 768 * 1.1);
}

TEST(HyperVariant, ImpossibleBudgetsSayWhatFits) {
  // MAD's width 128 with 128 positions: r_s = 16 mixing alone outgrows 4 d^2. Asked for by hand, it is an error.
  const std::string e = error_of("hyperglu:mix_rank=16", 128, 128);
  EXPECT_NE(e.find("cannot match softmax attention's 65,536 parameters at width 128 and max_len 128 with mix_rank=16"),
            std::string::npos) << e;
  EXPECT_NE(e.find("use mix_rank="), std::string::npos) << e;
  EXPECT_NE(e.find("over-budget label G-cg-12o!"), std::string::npos) << e;
  // and the advice works
  const auto start = e.find("use mix_rank=") + 13;
  const std::string fits = e.substr(start, e.find(' ', start) - start);
  EXPECT_TRUE(build("hyperglu:mix_rank=" + fits, 128, 128)) << fits;
}

TEST(HyperVariant, TheDefaultMixRankIsThePapersWhereItFitsElseHalvedUntilTheMatchedRankKeepsAnEighth) {
  // Where r_s = 16 leaves the matched side d/8 or more, the default is 16 (GPT-2 small's width and length).
  EXPECT_EQ(build("hyperglu", 768, 1024)->ranks().mix_rank, kPaperMixRank);
  // Width 256 over 256 positions: 16 does not fit, 8 leaves QK rank 32 = d/8 (the LM config's hand choice).
  auto lm = build("hyperglu", 256, 256);
  EXPECT_EQ(lm->ranks().mix_rank, 8);
  EXPECT_EQ(lm->ranks().qk_rank, build("hyperglu:mix_rank=8", 256, 256)->ranks().qk_rank);
  EXPECT_GE(lm->ranks().qk_rank, 256 / 8);
  EXPECT_LE(parameter_count(*lm), 4 * 256 * 256);
  // Width 128 over 128: 8 leaves no room, 4 leaves 16 = d/8.
  auto mad = build("hyperglu", 128, 128);
  EXPECT_EQ(mad->ranks().mix_rank, 4);
  EXPECT_GE(mad->ranks().qk_rank, 128 / 8);
  std::ostringstream description;
  mad->pretty_print(description);
  EXPECT_NE(description.str().find("mix_rank=4"), std::string::npos) << description.str();
  // No power of two reaches d/8: the largest r_s that leaves one rank step.
  auto narrow = build("hypermlp", 64, 256);
  EXPECT_EQ(narrow->ranks().mix_rank, 1);
  EXPECT_EQ(narrow->ranks().qk_rank, 2);
  EXPECT_LE(narrow->ranks().parameters, narrow->ranks().budget);
  // Where even r_s = 1 outgrows 4 d^2: the smallest layer of the label, which says it is over budget.
  auto over = build("hypermlp", 32, 4096);
  EXPECT_EQ(over->ranks().mix_rank, 1);
  EXPECT_EQ(over->ranks().qk_rank, 2);  // one step: two score heads
  EXPECT_GT(over->ranks().parameters, over->ranks().budget);
  description.str("");
  over->pretty_print(description);
  EXPECT_NE(description.str().find("over budget"), std::string::npos) << description.str();
}

TEST(HyperMixerRegistry, ErrorsNameTheProblem) {
  auto expect = [](const std::string& spec, const std::string& needle, int64_t max_len = 32) {
    const std::string e = error_of(spec, 384, max_len);
    EXPECT_NE(e.find(needle), std::string::npos) << spec << ": " << e;
  };
  expect("hypermlp:variant=G-cg-q-12o", "hypermlp takes S and R labels (use hyperglu for G)");
  expect("hyperglu:variant=R-cg-q-12o", "hyperglu takes G labels");
  expect("hypermlp:variant=R-cx", "mixer hypermlp: variant 'R-cx': unknown part 'cx'");
  expect("hypermlp:variant=R-pc,mix_rank=4", "mix_rank applies only to labels with temporal mixing");
  expect("hypermlp:variant=R-c-q,rope_theta=500", "rope_theta applies only to labels with p");
  expect("hypermlp:path=dense,block=8", "block applies to path=blocked only");
  expect("hypermlp:qk_rank=32", "setting them by hand needs an over-budget label");
  expect("hypermlp:variant=R-12o!,qk_rank=33", "qk_rank 33 must be a multiple of 2");
  expect("hypermlp:variant=R-p-12o!,heads=2,qk_rank=34", "even width each for RoPE");
  expect("hypermlp", "needs max_len", 0);
  auto m = build("hypermlp", 384, 32);
  try {
    m->forward(torch::randn({1, 33, 384}));
    ADD_FAILURE() << "33 positions with max_len 32 ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("position 32 is beyond max_len=32"), std::string::npos) << e.what();
  }
  // Without temporal mixing there is no length limit.
  EXPECT_EQ(build("hypermlp:variant=R-pc", 384, 32)->forward(torch::randn({1, 40, 384})).size(1), 40);
}

// Sets the mixing parameters of the slots [first, first+count) to their canonical extension: D = 0
// (p = -1) and no low-rank contribution, as if those slots had been appended to a shorter model.
void extend_canonically(ops::HyperMixing& m, int64_t first, int64_t count) {
  torch::NoGradGuard no_grad;
  if (!m.defined()) return;
  m.diag.narrow(1, first, count).fill_(-1.0);
  m.U.narrow(1, first, count).zero_();
  m.Vt.narrow(2, first, count).zero_();
}

// The newest token's output with a short history and with older tokens prepended (long history).
std::pair<torch::Tensor, torch::Tensor> newest_outputs(const std::string& spec, int64_t recent) {
  const int64_t dim = 16, total = 12;
  torch::manual_seed(3);
  auto m = build(spec, dim, total);
  m->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : m->parameters()) p.normal_(0, 0.5);
  }
  if (m->options().variant.lag) {  // lags >= recent use parameter rows [0, total - recent)
    extend_canonically(m->mix1, 0, total - recent);
    extend_canonically(m->mix2, 0, total - recent);
  } else {  // the forward layout's canonical (top-left) extension appends rows at the end
    extend_canonically(m->mix1, recent, total - recent);
    extend_canonically(m->mix2, recent, total - recent);
  }
  auto x = torch::randn({2, total, dim}, torch::kDouble);
  torch::NoGradGuard no_grad;
  auto long_history = m->forward(x).select(1, total - 1);
  auto short_history = m->forward(x.narrow(1, total - recent, recent)).select(1, recent - 1);
  return {long_history, short_history};
}

TEST(HyperTruncation, LagLayoutIgnoresOlderTokensUnderTheCanonicalExtension) {
  // RoPE alone is relative, so p keeps the invariance; p with g does not (the gate acts after the rotation,
  // so scores depend on absolute positions), nor does c (the conv sees the older tokens).
  for (const std::string spec : {"hypermlp:variant=R-g-12o!", "hyperglu:variant=G-g-12o!", "hypermlp:variant=R-1o!",
                                 "hypermlp:variant=R-p-12o!", "hyperglu:variant=G-p-1o!"}) {
    auto [long_history, short_history] = newest_outputs(spec, 5);
    EXPECT_CLOSE(long_history, short_history, 1e-10, 1e-12) << spec;
  }
}

TEST(HyperTruncation, ForwardLayoutDoesNot) {
  for (const std::string spec : {"hypermlp:variant=R-g-12!", "hyperglu:variant=G-g-12!", "hypermlp:variant=R-1!",
                                 "hypermlp:variant=R-p-12!"}) {
    auto [long_history, short_history] = newest_outputs(spec, 5);
    const double gap = (long_history - short_history).abs().max().item<double>();
    EXPECT_GT(gap, 1e-2 * short_history.abs().max().item<double>()) << spec;
  }
}

}  // namespace
}  // namespace seqmix
