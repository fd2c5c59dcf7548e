#include <gtest/gtest.h>

#include <map>

#include "seqmix/tasks/mad/recall.h"
#include "seqmix/tasks/task.h"

namespace seqmix {
namespace {

TEST(Recall, SequenceStructureMatchesMad) {
  RecallOptions o;  // V 16, L 128: keys 0-7, values 8-15
  DataRng rng(1);
  for (int i = 0; i < 50; ++i) {
    const TokenExample ex = recall_example(o, rng);
    ASSERT_EQ(ex.tokens.size(), 128u);
    std::map<int64_t, int64_t> value_of;
    for (size_t p = 0; p < ex.tokens.size(); p += 2) {
      const int64_t k = ex.tokens[p], v = ex.tokens[p + 1];
      ASSERT_GE(k, 0);
      ASSERT_LT(k, 8);
      ASSERT_GE(v, 8);
      ASSERT_LT(v, 16);
      EXPECT_EQ(ex.labels[p], kIgnoreIndex);  // keys are never scored
      const bool repeat = value_of.count(k) > 0;
      if (repeat) EXPECT_EQ(value_of[k], v) << "a key's value changed within a sequence";
      value_of[k] = v;
      const bool last = p + 2 == ex.tokens.size();
      // Multi-query: a value is scored iff its key was seen before; the final query is always scored
      // and always asks a key already shown.
      EXPECT_EQ(ex.labels[p + 1], (repeat || last) ? v : kIgnoreIndex);
      if (last) EXPECT_TRUE(repeat);
    }
  }
}

TEST(Recall, DatasetShiftsAndMasksLikeMad) {
  RecallTask task("mad.in_context_recall", RecallOptions{16, 128, 40, 30}, "spec");
  EXPECT_EQ(task.seq_len(), 127);
  const Batch& train = task.train_set();
  const Batch& test = task.test_set();
  EXPECT_EQ(train.inputs.sizes(), (at::IntArrayRef{40, 127}));
  EXPECT_EQ(test.targets.sizes(), (at::IntArrayRef{30, 127}));
  // Training targets are the next tokens, nothing masked.
  EXPECT_TRUE(torch::equal(train.inputs.narrow(1, 1, 126), train.targets.narrow(1, 0, 126)));
  EXPECT_EQ((train.targets == kIgnoreIndex).sum().item<int64_t>(), 0);
  // Test targets: scored positions hold keys' values and sit on key positions of the input (odd targets).
  auto scored = test.targets != kIgnoreIndex;
  const double per_sequence = scored.sum().item<double>() / 30.0;
  EXPECT_GT(per_sequence, 50.0);  // MAD reports about 55-56 at baseline
  EXPECT_LT(per_sequence, 60.0);
  EXPECT_TRUE((test.inputs.masked_select(scored) < 8).all().item<bool>());
  EXPECT_TRUE((test.targets.masked_select(scored) >= 8).all().item<bool>());
}

TEST(Recall, NoisyVariantUsesTheTopIdsInWholeSlots) {
  RecallOptions o;
  o.vocab_size = 32;
  o.noise_vocab_size = 16;
  o.frac_noise = 0.4;
  DataRng rng(2);
  int noise_slots = 0, slots = 0;
  for (int i = 0; i < 40; ++i) {
    const TokenExample ex = recall_example(o, rng);
    for (size_t p = 0; p + 2 < ex.tokens.size(); p += 2, ++slots) {
      const bool a = ex.tokens[p] >= 16, b = ex.tokens[p + 1] >= 16;
      EXPECT_EQ(a, b) << "noise must fill whole slots";
      if (a) {
        ++noise_slots;
        EXPECT_EQ(ex.labels[p + 1], kIgnoreIndex);
      }
    }
  }
  EXPECT_NEAR(static_cast<double>(noise_slots) / slots, 0.4, 0.05);
}

TEST(Recall, DeterministicFromSeedAndBatchesCycleEpochs) {
  RecallOptions o{16, 32, 10, 5};
  RecallTask a("t", o, "s"), b("t", o, "s");
  EXPECT_TRUE(torch::equal(a.test_set().inputs, b.test_set().inputs));
  EXPECT_TRUE(torch::equal(a.train_batch(7, 4).inputs, b.train_batch(7, 4).inputs));
  o.seed = 99;
  RecallTask c("t", o, "s");
  EXPECT_FALSE(torch::equal(a.test_set().inputs, c.test_set().inputs));
  // Batches 0..4 of size 2 cover epoch 0: every training example exactly once.
  std::vector<torch::Tensor> seen;
  for (int i = 0; i < 5; ++i) seen.push_back(a.train_batch(i, 2).inputs);
  auto epoch = torch::cat(seen, 0);
  auto sorted = std::get<0>(torch::sort(epoch.sum(1)));
  EXPECT_TRUE(torch::equal(sorted, std::get<0>(torch::sort(a.train_set().inputs.sum(1)))));
}

TEST(TokenAccuracy, MacroRecallAsTorchmetricsAndMicroAccuracy) {
  // Scored targets: class 1 x3 (2 right, one predicted 0), class 2 x1 (predicted 3). Classes 0 and 3 are
  // predicted but never targets: they count with recall 0. Macro = (2/3 + 0 + 0 + 0) / 4; micro = 2/4.
  auto targets = torch::tensor(std::vector<int64_t>{1, 1, 1, 2, kIgnoreIndex}).view({1, 5});
  auto pred = torch::tensor(std::vector<int64_t>{1, 1, 0, 3, 2});
  auto logits = torch::one_hot(pred, 5).to(torch::kFloat).view({1, 5, 5});
  MetricSums sums;
  add_token_accuracy(logits, targets, sums);
  auto v = sums.values();
  EXPECT_NEAR(v["token_accuracy"], 0.5, 1e-12);
  EXPECT_NEAR(v["accuracy"], (2.0 / 3.0) / 4.0, 1e-12);
}

}  // namespace
}  // namespace seqmix
