// The remaining MAD generators, MQAR and the argmax toy against the rules of specs/mad.md and the FEM paper.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "seqmix/io/config.h"
#include "seqmix/io/error.h"
#include "seqmix/io/tokenizer.h"
#include "seqmix/tasks/argmax.h"
#include "seqmix/tasks/mad/fuzzy_recall.h"
#include "seqmix/tasks/mad/token_tasks.h"
#include "seqmix/tasks/mqar.h"
#include "seqmix/tasks/task.h"
#include "seqmix/train/run.h"

namespace seqmix {
namespace {

TEST(SelectiveCopy, LayoutAndAlignedTargets) {
  SelectiveCopyOptions o;
  o.vocab_size = 16;
  o.seq_len = 12;
  o.num_tokens_to_copy = 3;
  DataRng rng(1);
  for (int i = 0; i < 30; ++i) {
    const TokenExample ex = selective_copy_example(o, rng);
    ASSERT_EQ(ex.tokens.size(), 12u);
    std::vector<int64_t> data;
    for (int p = 0; p < 8; ++p)
      if (ex.tokens[p] != 14) data.push_back(ex.tokens[p]);
    ASSERT_EQ(data.size(), 3u);          // 3 data tokens among 5 blanks
    EXPECT_NE(ex.tokens[7], 14);         // no blank after the last data token
    EXPECT_EQ(ex.tokens[8], 15);         // the copy token
    for (int p = 9; p < 12; ++p) EXPECT_EQ(ex.tokens[p], 14);
    for (int p = 0; p < 9; ++p) EXPECT_EQ(ex.labels[p], kIgnoreIndex);
    for (int p = 0; p < 3; ++p) EXPECT_EQ(ex.labels[9 + p], data[p]);  // in order
    for (int64_t d : data) EXPECT_LT(d, 14);
  }
}

TEST(Compression, TargetIsTheInputEndingInTheCompressionToken) {
  CompressionOptions o;
  DataRng rng(2);
  const TokenExample ex = compression_example(o, rng);
  ASSERT_EQ(ex.tokens.size(), 32u);
  EXPECT_EQ(ex.tokens.back(), 15);
  EXPECT_EQ(ex.labels, ex.tokens);
  for (size_t i = 0; i + 1 < ex.tokens.size(); ++i) EXPECT_LT(ex.tokens[i], 15);
}

TEST(Compression, NoiseReplacesDataTokensAndStaysInTheTarget) {
  CompressionOptions o;  // V 16 with 4 noise ids: data 0-10, noise 11-14, compression token 15
  o.noise_vocab_size = 4;
  o.frac_noise = 0.5;
  DataRng rng(12);
  int noise = 0, data = 0;
  for (int i = 0; i < 50; ++i) {
    const TokenExample ex = compression_example(o, rng);
    ASSERT_EQ(ex.tokens.size(), 32u);
    EXPECT_EQ(ex.tokens.back(), 15);
    EXPECT_EQ(ex.labels, ex.tokens);  // MAD's quirk: the noisy input is the target
    for (size_t p = 0; p + 1 < ex.tokens.size(); ++p) {
      ASSERT_LT(ex.tokens[p], 15);
      (ex.tokens[p] >= 11 ? noise : data) += 1;
    }
  }
  EXPECT_NEAR(static_cast<double>(noise) / (noise + data), 0.5, 0.05);
  o.frac_noise = 0.2;
  o.noise_vocab_size = 0;
  EXPECT_THROW(validate(o), Error);  // noise needs noise ids
  o.noise_vocab_size = 15;
  EXPECT_THROW(validate(o), Error);  // no data ids left
}

TEST(Memorization, NoiseSlotsAreUnscoredPairsOfNoiseTokens) {
  MemorizationOptions o;  // V 256, 56 noise ids: symbols 0-198 (keys 0-98, values 99-198), noise 199-254
  o.noise_vocab_size = 56;
  o.frac_noise = 0.5;
  const auto map = memorization_map(o);
  ASSERT_EQ(map.size(), 99u);
  for (int64_t v : map) {
    EXPECT_GE(v, 99);
    EXPECT_LE(v, 198);
  }
  DataRng rng(13);
  int noise_slots = 0;
  for (int i = 0; i < 40; ++i) {
    const TokenExample ex = memorization_example(o, map, rng);
    ASSERT_EQ(ex.tokens.size(), 32u);
    int facts = 0;
    for (size_t p = 0; p < 32; p += 2) {
      if (ex.tokens[p] >= 199) {
        EXPECT_GE(ex.tokens[p + 1], 199);
        EXPECT_LE(ex.tokens[p + 1], 254);
        EXPECT_EQ(ex.labels[p], kIgnoreIndex);
        EXPECT_EQ(ex.labels[p + 1], kIgnoreIndex);
        ++noise_slots;
      } else {
        EXPECT_LT(ex.tokens[p], 99);
        EXPECT_EQ(ex.tokens[p + 1], 255);
        EXPECT_EQ(ex.labels[p + 1], map[static_cast<size_t>(ex.tokens[p])]);
        ++facts;
      }
    }
    EXPECT_GE(facts, 1);  // one slot always holds a fact
  }
  EXPECT_NEAR(noise_slots / (40.0 * 16), 0.5, 0.06);
  o.seq_len = 31;
  EXPECT_THROW(validate(o), Error);
}

TEST(Memorization, FixedBijectionScoredAtInsertTokens) {
  MemorizationOptions o;
  const auto map = memorization_map(o);
  ASSERT_EQ(map.size(), 127u);
  std::set<int64_t> values(map.begin(), map.end());
  EXPECT_EQ(values.size(), 127u);  // one-to-one
  EXPECT_GE(*values.begin(), 127);
  EXPECT_LE(*values.rbegin(), 254);
  EXPECT_EQ(memorization_map(o), map);  // fixed by the seed
  DataRng rng(3);
  const TokenExample ex = memorization_example(o, map, rng);
  ASSERT_EQ(ex.tokens.size(), 32u);
  for (size_t p = 0; p < 32; p += 2) {
    EXPECT_LT(ex.tokens[p], 127);
    EXPECT_EQ(ex.tokens[p + 1], 255);
    EXPECT_EQ(ex.labels[p], kIgnoreIndex);
    EXPECT_EQ(ex.labels[p + 1], map[static_cast<size_t>(ex.tokens[p])]);
  }
}

TEST(FuzzyRecall, MotifsPaddingAndScoring) {
  FuzzyRecallOptions o;  // V 16: keys 0-6, values 7-14, pad 15
  DataRng rng(4);
  for (bool training : {true, false})
    for (int i = 0; i < 40; ++i) {
      const TokenExample ex = fuzzy_recall_example(o, training, rng);
      ASSERT_EQ(ex.tokens.size(), 129u);
      size_t p = 0;
      while (ex.tokens[p] == 15) ++p;
      EXPECT_GE(p, 2u);  // 2-7 left pads
      EXPECT_LE(p, 7u);
      // Split into alternating key and value motifs; check distinct tokens and consistent mapping.
      std::map<std::vector<int64_t>, std::vector<int64_t>> value_of;
      std::vector<int64_t> key, value, value_labels;
      std::vector<int64_t> last_key, last_value;
      auto close_pair = [&] {
        if (key.empty()) return;
        EXPECT_EQ(std::set<int64_t>(key.begin(), key.end()).size(), key.size());
        EXPECT_EQ(std::set<int64_t>(value.begin(), value.end()).size(), value.size());
        if (!training) EXPECT_EQ(key.size(), 3u) << "test keys have length K";
        const bool repeat = value_of.count(key) > 0;
        if (repeat) EXPECT_EQ(value_of[key], value);
        value_of[key] = value;
        last_key = key;
        last_value = value;
        key.clear();
        value.clear();
      };
      for (; p < ex.tokens.size(); ++p) {
        const int64_t t = ex.tokens[p];
        if (t < 7) {
          if (!value.empty()) close_pair();
          key.push_back(t);
        } else {
          value.push_back(t);
        }
      }
      close_pair();
      // The final probe's value is always scored.
      for (size_t k = 0; k < last_value.size(); ++k)
        EXPECT_EQ(ex.labels[ex.labels.size() - last_value.size() + k], last_value[k]);
    }
}

TEST(FuzzyRecall, SingleQueryScoresOnlyTheFinalProbeAfterTheCopyPrefix) {
  FuzzyRecallOptions o;  // single query at V 16: keys 0-6, values 7-13, pad 14, copy prefix 15
  o.multi_query = false;
  DataRng rng(5);
  for (bool training : {true, false})
    for (int i = 0; i < 40; ++i) {
      const TokenExample ex = fuzzy_recall_example(o, training, rng);
      ASSERT_EQ(ex.tokens.size(), 129u);
      size_t p = 0;
      while (ex.tokens[p] == 14) ++p;
      EXPECT_GE(p, 1u);
      // Exactly one copy prefix, followed by the probe key and value, which are the sequence's end.
      std::vector<size_t> prefixes;
      for (size_t q = 0; q < ex.tokens.size(); ++q) {
        if (q >= p) ASSERT_NE(ex.tokens[q], 14) << "a pad after the first real token";
        if (ex.tokens[q] == 15) prefixes.push_back(q);
      }
      ASSERT_EQ(prefixes.size(), 1u);
      const size_t prefix = prefixes[0];
      size_t key_end = prefix + 1;
      while (ex.tokens[key_end] < 7) ++key_end;
      const size_t key_len = key_end - prefix - 1, value_len = ex.tokens.size() - key_end;
      EXPECT_GE(key_len, 1u);
      EXPECT_LE(key_len, 3u);
      if (!training) EXPECT_EQ(key_len, 3u);
      EXPECT_GE(value_len, 1u);
      EXPECT_LE(value_len, 3u);
      for (size_t q = 0; q < ex.tokens.size(); ++q)
        EXPECT_EQ(ex.labels[q], q >= key_end ? ex.tokens[q] : kIgnoreIndex) << "position " << q;
    }
  o.vocab_size = 5;  // 3 symbols: too few for keys of 3 distinct tokens
  EXPECT_THROW(validate(o), Error);
}

TEST(Mqar, ContextQueriesAndShiftedLabels) {
  MqarOptions o;
  o.vocab_size = 100;
  o.seq_len = 32;
  o.num_kv_pairs = 4;
  o.random_non_queries = false;
  DataRng rng(5);
  for (int i = 0; i < 30; ++i) {
    const TokenExample ex = mqar_example(o, rng);
    ASSERT_EQ(ex.tokens.size(), 32u);
    std::map<int64_t, int64_t> value_of;
    for (int j = 0; j < 4; ++j) {
      const int64_t k = ex.tokens[2 * j], v = ex.tokens[2 * j + 1];
      EXPECT_GE(k, 1);
      EXPECT_LT(k, 50);
      EXPECT_GE(v, 50);
      EXPECT_EQ(value_of.count(k), 0u) << "keys are distinct";
      value_of[k] = v;
    }
    int scored = 0;
    for (size_t p = 8; p < 32; ++p) {
      if (ex.labels[p] == kIgnoreIndex) {
        if (ex.tokens[p] != 0) EXPECT_TRUE(value_of.count(ex.tokens[p])) << "non-zero query-region tokens are keys";
        continue;
      }
      ++scored;
      ASSERT_TRUE(value_of.count(ex.tokens[p])) << "the value is predicted at the queried key";
      EXPECT_EQ(ex.labels[p], value_of[ex.tokens[p]]);
      EXPECT_EQ((p - 8) % 2, 0u);
    }
    EXPECT_EQ(scored, 4);  // each key queried exactly once
    for (size_t p = 0; p < 8; ++p) EXPECT_EQ(ex.labels[p], kIgnoreIndex);
  }
  EXPECT_THROW(validate(MqarOptions{100, 16, 5}), Error);  // 2*5*1 + 2*5 > 16
  EXPECT_NO_THROW(validate(MqarOptions{100, 16, 4}));
}

TEST(Mqar, TrainsWithZoologysProtocolUnlessTheUserSetsOtherwise) {
  Config config(run_config_schema());
  config.set("task", "mqar:num_train=100,num_test=4", "test");  // 4 batches of 32 per epoch
  config.apply_override("train.lr=0.002");
  seqmix::Run run = build_run(config, "");
  EXPECT_EQ(run.train.optimizer.lr, 0.002);  // the user's value wins
  EXPECT_EQ(run.train.optimizer.weight_decay, 0.1);
  EXPECT_EQ(run.train.batch_size, 32);
  EXPECT_EQ(run.train.steps, 400);  // 100 epochs
  EXPECT_EQ(run.train.schedule_stage, 4);
  EXPECT_EQ(run.train.eval_every, 4);
  EXPECT_EQ(run.train.min_lr, 0.0);
  EXPECT_EQ(run.train.target, 0.99);
  EXPECT_NE(run.model_spec.find("dropout=0.1"), std::string::npos) << run.model_spec;
  EXPECT_NE(run.model_spec.find("pos=learned"), std::string::npos) << run.model_spec;
}

TEST(Mqar, AccuracyIsAveragedPerExample) {
  auto targets = torch::full({2, 4}, kIgnoreIndex, torch::kLong);
  targets[0][1] = 3;  // example 0: one query, right
  targets[1][0] = 1;  // example 1: three queries, one right
  targets[1][2] = 2;
  targets[1][3] = 2;
  auto pred = torch::tensor(std::vector<int64_t>{0, 3, 0, 0, 1, 0, 0, 0}).view({2, 4});
  auto logits = torch::one_hot(pred, 5).to(torch::kFloat);
  MqarTask task(MqarOptions{100, 32, 4, 0.01, true, 1, 4, 4}, "mqar");
  MetricSums sums;
  task.add_metrics(logits, Batch{torch::zeros({2, 4}, torch::kLong), targets}, sums);
  EXPECT_NEAR(sums.values()["accuracy"], (1.0 + 1.0 / 3.0) / 2.0, 1e-12);
}

TEST(Argmax, WinnersMarginTargetAndIndexAccuracy) {
  ArgmaxOptions o;
  o.seq_len = 16;
  o.dim = 32;
  o.num_test = 20;
  ArgmaxTask task(o, "argmax");
  const Batch& test = task.test_set();
  ASSERT_EQ(test.inputs.sizes(), (at::IntArrayRef{20, 16, 32}));
  // Exactly one value per channel stands out by about the margin; the target is the channel max.
  auto top2 = std::get<0>(test.inputs.topk(2, 1));
  EXPECT_TRUE(((top2.select(1, 0) - top2.select(1, 1)) > 0.5).all().item<bool>());
  EXPECT_TRUE(torch::equal(test.targets, std::get<0>(test.inputs.max(1))));
  EXPECT_NEAR(test.inputs.std().item<double>(), std::sqrt(1.0 / 16 * (1 - 1.0 / 16)), 0.05);
  // The exact target scores 1; the mean over positions scores near chance (1/T).
  MetricSums exact, mean;
  task.add_metrics(test.targets, test, exact);
  task.add_metrics(test.inputs.mean(1), test, mean);
  EXPECT_DOUBLE_EQ(exact.values()["index_accuracy"], 1.0);
  EXPECT_LT(mean.values()["index_accuracy"], 0.2);
  EXPECT_NEAR(task.loss(test.targets, test).item<double>(), 0.0, 1e-12);
  // Training batches are deterministic functions of the batch index.
  EXPECT_TRUE(torch::equal(task.train_batch(3, 4).inputs, task.train_batch(3, 4).inputs));
  EXPECT_FALSE(torch::equal(task.train_batch(3, 4).inputs, task.train_batch(4, 4).inputs));
}

TEST(TaskRegistry, EveryTaskBuildsSmallAndListsItsDefaults) {
  const std::string ett_tiny = (std::filesystem::path(__FILE__).parent_path().parent_path() / "data/ett_tiny.csv").string();
  const std::map<std::string, std::string> small = {
      {"ett", "path=" + ett_tiny + ",input_len=8,horizon=2,train_rows=20,val_rows=5,test_rows=5"},
      {"text", "path=" + ett_tiny + ",seq_len=8,vocab_size=300,num_test=4"},  // any text file will do
      {"mad.in_context_recall", "num_train=8,num_test=4"},
      {"mad.fuzzy_recall", "num_train=8,num_test=4"},
      {"mad.noisy_recall", "num_train=8,num_test=4"},
      {"mad.selective_copy", "num_train=8,num_test=4"},
      {"mad.compression", "num_train=8,num_test=4"},
      {"mad.memorization", "num_train=8,num_test=4"},
      {"mqar", "num_train=8,num_test=4"},
      {"argmax", "num_train=8,num_test=4,seq_len=8,dim=4"},
      {"fashion_mnist", "num_train=8,num_val=4"}};  // Debian's dataset-fashion-mnist
  for (const auto& info : task_infos()) {
    SCOPED_TRACE(info.name);
    ASSERT_TRUE(small.count(info.name)) << "new task without a registry test entry";
    if (info.name == "text" && !Tokenizer::available()) continue;  // a sanitizer build has no tokenizer
    if (info.name == "fashion_mnist" && !std::filesystem::exists("/usr/share/datasets/fashion-mnist")) continue;
    auto task = build_task(info.name + ":" + small.at(info.name));
    EXPECT_EQ(task->name(), info.name);
    EXPECT_EQ(task->test_set().size(), 4);
    EXPECT_EQ(task->train_batch(0, 3).size(), 3);
    EXPECT_EQ(task->test_set().inputs.size(1), task->seq_len());
  }
}

}  // namespace
}  // namespace seqmix
