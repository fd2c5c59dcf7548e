// Hyper-Link and the Memory Lobe (ELA paper §V): the residual unit written out, the ELA-GPT parameter
// count of the paper (6,624,272 with the lobe, 5,837,840 without), decoding through lobes and MoE blocks,
// the causal lobe keeping the model causal and the bidirectional one breaking it.
#include <gtest/gtest.h>

#include <tuple>

#include "seqmix/layers/exact_linear_attention.h"
#include "seqmix/models/language_model.h"
#include "seqmix/models/registry.h"
#include "support/error_of.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

torch::Tensor affine_tanh(const torch::Tensor& z, const torch::Tensor& w) { return torch::tanh(torch::matmul(z, w)); }

TEST(HyperLink, EachBlockAddsTheFlowAndItsLobeWithNoAttentionBranch) {
  torch::manual_seed(0);
  const int64_t D = 5;
  std::vector<torch::Tensor> w;
  for (int i = 0; i < 6; ++i) w.push_back(torch::randn({D, D}, torch::kDouble) * 0.8);
  auto x = torch::randn({2, 3, D}, torch::kDouble);
  auto blocks = [&](bool with_lobe) {
    std::vector<BlockSublayers> out(2);
    for (size_t b = 0; b < 2; ++b) {
      out[b].mixer = [&, b](const torch::Tensor& z) { return affine_tanh(z, w[3 * b]); };
      out[b].raw_channel = [&, b](const torch::Tensor& z) { return affine_tanh(z, w[3 * b + 1]); };
      if (with_lobe) out[b].lobe = [&, b](const torch::Tensor& z) { return affine_tanh(z, w[3 * b + 2]); };
    }
    return out;
  };
  for (bool skip : {true, false})
    for (bool lobe : {true, false}) {
      auto z = x;
      for (int64_t b = 0; b < 2; ++b) {
        auto a = affine_tanh(z, w[3 * b]);
        auto flow = (skip ? a : torch::zeros_like(a)) + affine_tanh(a, w[3 * b + 1]);
        z = z + flow + (lobe ? affine_tanh(flow, w[3 * b + 2]) : torch::zeros_like(flow));
      }
      auto scheme = build_residual(std::string("hyperlink:skip=") + (skip ? "1" : "0"), 2);
      EXPECT_CLOSE(scheme->forward(x, blocks(lobe)), z, 1e-13, 1e-13) << "skip " << skip << " lobe " << lobe;
    }
}

LanguageModelOptions ela_gpt(const std::string& residual, int64_t vocab, int64_t dim, int64_t layers) {
  LanguageModelOptions o;
  o.vocab_size = vocab;
  apply_model_spec("lm:dim=" + std::to_string(dim) + ",layers=" + std::to_string(layers) +
                       ",channel=(moe:experts=4,top_k=2),residual=(" + residual + "),final_norm=0,tie=1,head_bias=0",
                   o);
  o.mixers = {"ela:heads=4"};
  o.max_len = 64;
  return o;
}

TEST(HyperLink, ElaGptHasThePapersParameterCount) {
  // V = 6400, d = 256, 4 layers, 4 experts (top-2), tied embedding, no final norm (ELA paper §VI).
  EXPECT_EQ(LanguageModel(ela_gpt("hyperlink:lobe=causal", 6400, 256, 4))->parameter_count(), 6624272);
  EXPECT_EQ(LanguageModel(ela_gpt("hyperlink", 6400, 256, 4))->parameter_count(), 5837840);
}

TEST(HyperLink, DecodingThroughLobesAndExpertsEqualsTheForward) {
  for (const std::string residual : {"hyperlink:lobe=causal", "hyperlink:lobe=causal,lobe_kernel=sum_sq_euclidean,skip=0",
                                     "hyperlink"}) {
    SCOPED_TRACE(residual);
    torch::manual_seed(3);
    LanguageModel m(ela_gpt(residual, 13, 16, 2));
    m->to(torch::kDouble);
    torch::NoGradGuard no_grad;
    auto tokens = torch::randint(0, 13, {2, 9}, torch::kLong);
    auto full = m->forward(tokens);
    auto state = m->init_state(2);
    EXPECT_CLOSE(m->prefill(tokens.narrow(1, 0, 4), state), full.narrow(1, 0, 4), 1e-10, 1e-12);
    for (int64_t t = 4; t < 9; ++t) EXPECT_CLOSE(m->step(tokens.select(1, t), state), full.select(1, t), 1e-10, 1e-12);
  }
}

// Whether changing token t changes any logit before t.
bool leaks_the_future(LanguageModel& m, int64_t t) {
  torch::NoGradGuard no_grad;
  auto tokens = torch::randint(0, 13, {1, 10}, torch::kLong);
  auto changed = tokens.clone();
  changed[0][t] = (tokens[0][t].item<int64_t>() + 5) % 13;
  return !torch::equal(m->forward(tokens).narrow(1, 0, t), m->forward(changed).narrow(1, 0, t));
}

TEST(MemoryLobe, CausalLobeKeepsTheModelCausalAndTheBidirectionalOneDoesNot) {
  torch::manual_seed(4);
  LanguageModel causal(ela_gpt("hyperlink:lobe=causal", 13, 16, 2));
  causal->to(torch::kDouble);
  for (int64_t t : {1, 5, 9}) EXPECT_FALSE(leaks_the_future(causal, t)) << "token " << t;

  ::testing::internal::CaptureStderr();
  LanguageModel bidirectional(ela_gpt("hyperlink:lobe=bidirectional", 13, 16, 2));
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warning.find("see future tokens"), std::string::npos) << warning;
  bidirectional->to(torch::kDouble);
  EXPECT_TRUE(leaks_the_future(bidirectional, 5));
  EXPECT_THROW(bidirectional->init_state(1), std::exception);
}

TEST(MemoryLobe, IsASingleHeadElaWithoutRopeOrOutput) {
  EXPECT_EQ(build_memory_lobe("hyperlink", 8, true), nullptr);
  EXPECT_EQ(build_memory_lobe("prenorm", 8, true), nullptr);
  // causal (true) or not for lobe=causal, auto in a causal model, auto in an encoder, bidirectional.
  const std::vector<std::tuple<std::string, bool, bool>> cases = {{"hyperlink:lobe=causal", true, true},
                                                                  {"hyperlink:lobe=auto", true, true},
                                                                  {"hyperlink:lobe=auto", false, false},
                                                                  {"hyperlink:lobe=bidirectional", true, false}};
  for (const auto& [residual, causal_model, causal] : cases) {
    SCOPED_TRACE(residual);
    auto lobe = std::dynamic_pointer_cast<ExactLinearAttentionImpl>(build_memory_lobe(residual, 8, causal_model));
    ASSERT_NE(lobe, nullptr);
    EXPECT_EQ(lobe->is_causal(), causal);
    const auto& o = lobe->options();
    EXPECT_EQ(o.heads, 1);
    EXPECT_FALSE(o.rope);
    EXPECT_FALSE(o.output);
    EXPECT_FALSE(o.bias);
    EXPECT_EQ(o.kernel, "hadamard_exp");
    EXPECT_EQ(o.dim, 8);
  }
  EXPECT_EQ(std::dynamic_pointer_cast<ExactLinearAttentionImpl>(
                build_memory_lobe("hyperlink:lobe=causal,lobe_kernel=sum_sq_euclidean", 8, true))
                ->options()
                .kernel,
            "sum_sq_euclidean");
  // Bad kernels and lobes are refused when the residual spec is parsed.
  EXPECT_NE(testing::error_of([] { ResidualSpec("hyperlink:lobe=causal,lobe_kernel=nope"); }).find("nope"), std::string::npos);
  EXPECT_THROW(ResidualSpec("hyperlink:lobe=sideways"), Error);
}

TEST(MemoryLobe, AutoIsCausalInACausalModelAndSilent) {
  torch::manual_seed(5);
  ::testing::internal::CaptureStderr();
  LanguageModel m(ela_gpt("hyperlink:lobe=auto", 13, 16, 2));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  m->to(torch::kDouble);
  EXPECT_FALSE(leaks_the_future(m, 4));
  EXPECT_NO_THROW(m->init_state(1));
}

}  // namespace
}  // namespace seqmix
