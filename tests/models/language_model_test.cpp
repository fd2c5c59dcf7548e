#include <gtest/gtest.h>

#include "seqmix/models/language_model.h"
#include "seqmix/train/optimizer.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

LanguageModelOptions small(std::vector<MixerSpec> mixers) {
  LanguageModelOptions o;
  o.vocab_size = 11;
  o.dim = 16;
  o.layers = 2;
  o.mixers = std::move(mixers);
  o.max_len = 32;
  return o;
}

TEST(LanguageModel, ShapesAndParameterCount) {
  torch::manual_seed(0);
  auto o = small({"softmax"});
  LanguageModel m(o);
  auto tokens = torch::randint(0, 11, {3, 7}, torch::kLong);
  EXPECT_EQ(m->forward(tokens).sizes(), (at::IntArrayRef{3, 7, 11}));
  // Embedding 11x16, per block: 2 RMSNorm (16 each), qkv 16x48+48, out 16x16+16, SwiGLU 3x16x48
  // (hidden 48 = 8/3*16 rounded up to 16), final norm 16, head 16x11+11.
  const int64_t block = 2 * 16 + (16 * 48 + 48) + (16 * 16 + 16) + 3 * 16 * 48;
  EXPECT_EQ(m->parameter_count(), 11 * 16 + 2 * block + 16 + 16 * 11 + 11);
  o.tie_embeddings = true;
  LanguageModel tied(o);
  EXPECT_EQ(tied->parameter_count(), 11 * 16 + 2 * block + 16 + 11);
}

TEST(LanguageModel, RealValuedInputsAndOutputs) {
  LanguageModelOptions o = small({"gla"});
  o.vocab_size = 0;
  o.input_features = 5;
  o.output_features = 3;
  LanguageModel m(o);
  EXPECT_EQ(m->forward(torch::randn({2, 6, 5})).sizes(), (at::IntArrayRef{2, 6, 3}));
}

TEST(LanguageModel, LossDecreasesOnAFixedBatch) {
  torch::manual_seed(1);
  LanguageModel m(small({"softmax", "gla"}));
  auto tokens = torch::randint(0, 11, {4, 12}, torch::kLong);
  auto inputs = tokens.narrow(1, 0, 11), targets = tokens.narrow(1, 1, 11);
  auto loss_of = [&] {
    return torch::cross_entropy_loss(m->forward(inputs).reshape({-1, 11}), targets.reshape({-1}));
  };
  OptimizerConfig oc;
  oc.lr = 3e-3;
  auto opt = make_adamw(*m, oc);
  const double first = loss_of().item<double>();
  for (int i = 0; i < 60; ++i) {
    opt->zero_grad();
    auto l = loss_of();
    l.backward();
    opt->step();
  }
  const double last = loss_of().item<double>();
  EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
}

TEST(LanguageModel, EmbeddingDropoutActsOnlyWhileTraining) {
  torch::manual_seed(2);
  auto o = small({"softmax"});
  o.embedding_dropout = 0.5;
  LanguageModel m(o);
  auto tokens = torch::randint(0, 11, {2, 9}, torch::kLong);
  m->train();
  EXPECT_FALSE(torch::equal(m->forward(tokens), m->forward(tokens)));  // fresh masks each call
  m->eval();
  const auto eval_out = m->forward(tokens);
  EXPECT_TRUE(torch::equal(eval_out, m->forward(tokens)));
  o.embedding_dropout = 0.0;  // the same weights without dropout give the eval output
  torch::manual_seed(2);
  LanguageModel plain(o);
  plain->train();
  EXPECT_TRUE(torch::allclose(plain->forward(tokens), eval_out, 1e-6, 1e-6));
  // Decoding is evaluation: no dropout, so it equals the full forward.
  LanguageModelState state = m->init_state(2);
  std::vector<torch::Tensor> steps;
  for (int64_t t = 0; t < 9; ++t) steps.push_back(m->step(tokens.select(1, t), state));
  EXPECT_TRUE(torch::allclose(torch::stack(steps, 1), eval_out, 1e-5, 1e-5));
}

TEST(LanguageModel, DecodingEqualsTheFullForwardForEveryCausalMixer) {
  for (const char* spec : {"softmax", "relu", "linear", "gla", "ssm"}) {
    SCOPED_TRACE(spec);
    torch::manual_seed(2);
    auto o = small({spec});
    o.position = "learned";
    LanguageModel m(o);
    m->to(torch::kDouble);
    torch::NoGradGuard no_grad;
    auto tokens = torch::randint(0, 11, {2, 9}, torch::kLong);
    auto full = m->forward(tokens);
    auto state = m->init_state(2);
    auto pre = m->prefill(tokens.narrow(1, 0, 4), state);
    EXPECT_CLOSE(pre, full.narrow(1, 0, 4), 1e-10, 1e-12);
    for (int64_t t = 4; t < 9; ++t) EXPECT_CLOSE(m->step(tokens.select(1, t), state), full.select(1, t), 1e-10, 1e-12);
  }
}

TEST(LanguageModel, GreedyGenerationEqualsRerunningTheFullForward) {
  torch::manual_seed(3);
  LanguageModel m(small({"softmax", "ssm"}));
  m->to(torch::kDouble);
  torch::NoGradGuard no_grad;
  auto prompt = torch::randint(0, 11, {2, 3}, torch::kLong);
  Sampling greedy;
  greedy.temperature = 0;
  auto generated = m->generate(prompt, 8, greedy);
  ASSERT_EQ(generated.sizes(), (at::IntArrayRef{2, 11}));
  auto seq = prompt;
  for (int i = 0; i < 8; ++i) {
    auto next = m->forward(seq).select(1, seq.size(1) - 1).argmax(-1, true);
    seq = torch::cat({seq, next}, 1);
  }
  EXPECT_TRUE(torch::equal(generated, seq));
  // Sampling is reproducible from its seed.
  Sampling s;
  s.seed = 9;
  s.top_k = 4;
  EXPECT_TRUE(torch::equal(m->generate(prompt, 6, s), m->generate(prompt, 6, s)));
}

// Packed rows (a text task's pack=1): each sequence's logits equal those of the sequence run alone, positions
// restarting at its first token, with learned positions, mixers that pack natively and not, and a Memory Lobe.
TEST(LanguageModel, PackedRowsEqualEachSequenceAlone) {
  for (const std::string residual : {"prenorm", "hyperlink:lobe=bidirectional"}) {
    SCOPED_TRACE(residual);
    torch::manual_seed(3);
    auto o = small({"softmax", "fem:prior=gla", "gla"});
    apply_model_spec("lm:dim=16,layers=3,pos=learned,residual=(" + residual + ")", o);
    LanguageModel m(o);
    m->to(torch::kDouble);
    const auto tokens = torch::randint(0, 11, {2, 12}, torch::kLong);
    auto starts = torch::zeros({2, 12}, torch::kBool);
    for (int64_t t : {3, 4, 10}) starts[0][t] = true;  // row 0: 0-2, 3, 4-9, 10-11
    starts[1][7] = true;                                // row 1: 0-6, 7-11
    const auto packed = m->forward_packed(tokens, starts);
    ASSERT_EQ(packed.sizes(), (at::IntArrayRef{2, 12, 11}));
    const std::vector<std::tuple<int64_t, int64_t, int64_t>> sequences{{0, 0, 3}, {0, 3, 1}, {0, 4, 6}, {0, 10, 2},
                                                                      {1, 0, 7}, {1, 7, 5}};
    for (const auto& [row, begin, length] : sequences)
      EXPECT_CLOSE(packed[row].narrow(0, begin, length),
                   m->forward(tokens[row].narrow(0, begin, length).unsqueeze(0))[0], 1e-10, 1e-12)
          << "row " << row << " from " << begin;
    EXPECT_CLOSE(m->run(tokens, {}), m->forward(tokens), 0, 0);
    EXPECT_THROW(m->forward_packed(tokens, starts.narrow(1, 0, 5)), std::exception);
    // One 40-token sequence is beyond the learned positions (max_len 32); two of 20 are not.
    auto long_starts = torch::zeros({1, 40}, torch::kBool);
    const auto long_tokens = torch::randint(0, 11, {1, 40}, torch::kLong);
    EXPECT_THROW(m->forward_packed(long_tokens, long_starts), std::exception);
    long_starts[0][20] = true;
    EXPECT_EQ(m->forward_packed(long_tokens, long_starts).size(1), 40);
  }
}

TEST(LanguageModel, BadInputsAreClearErrors) {
  LanguageModel m(small({"softmax"}));
  EXPECT_THROW(m->forward(torch::tensor(std::vector<int64_t>{1, 2, 15, 3}).view({1, 4})), c10::Error);
  EXPECT_THROW(m->forward(torch::tensor(std::vector<int64_t>{1, -1}).view({1, 2})), c10::Error);
  EXPECT_THROW(m->forward(torch::randn({1, 4})), c10::Error);
  auto o = small({"softmax:causal=0"});
  LanguageModel enc(o);
  EXPECT_THROW(enc->init_state(1), std::exception);
}

}  // namespace
}  // namespace seqmix
