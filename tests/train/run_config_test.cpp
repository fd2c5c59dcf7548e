// One set of training defaults: a run config with nothing set (the CLI's and a YAML config's starting point) gives
// exactly the TrainConfig a C++ caller of train() starts from.
#include <gtest/gtest.h>

#include "seqmix/train/run.h"

namespace seqmix {
namespace {

TEST(RunConfig, TheSchemasDefaultsAreTrainConfigsDefaults) {
  const Config config(run_config_schema());
  const TrainConfig from_schema = train_config_from(config);
  const TrainConfig plain;
  EXPECT_EQ(from_schema.steps, plain.steps);
  EXPECT_EQ(from_schema.batch_size, plain.batch_size);
  EXPECT_EQ(from_schema.optimizer.lr, plain.optimizer.lr);
  EXPECT_EQ(from_schema.optimizer.weight_decay, plain.optimizer.weight_decay);
  EXPECT_EQ(from_schema.optimizer.beta1, plain.optimizer.beta1);
  EXPECT_EQ(from_schema.optimizer.beta2, plain.optimizer.beta2);
  EXPECT_EQ(from_schema.optimizer.eps, plain.optimizer.eps);
  EXPECT_EQ(from_schema.optimizer.decay_vectors, plain.optimizer.decay_vectors);
  EXPECT_EQ(from_schema.min_lr, plain.min_lr);
  EXPECT_EQ(from_schema.warmup_steps, plain.warmup_steps);
  EXPECT_EQ(from_schema.grad_clip, plain.grad_clip);
  EXPECT_EQ(from_schema.eval_every, plain.eval_every);
  EXPECT_EQ(from_schema.log_every, plain.log_every);
  EXPECT_EQ(from_schema.target, plain.target);
  EXPECT_EQ(from_schema.select_by, plain.select_by);
  EXPECT_EQ(from_schema.schedule_stage, plain.schedule_stage);
  EXPECT_EQ(from_schema.checkpoint_every, plain.checkpoint_every);
  EXPECT_EQ(from_schema.keep_checkpoints, plain.keep_checkpoints);
  EXPECT_EQ(from_schema.skip_nonfinite, plain.skip_nonfinite);
  EXPECT_EQ(from_schema.precision, plain.precision);
  EXPECT_EQ(from_schema.device, plain.device);
  EXPECT_EQ(from_schema.init_from, plain.init_from);
}

TEST(RunConfig, EveryTrainKeyReachesTheTrainConfig) {
  // A key the reader forgot would keep its default: set each to a value unlike its default and see it arrive.
  Config config(run_config_schema());
  const std::vector<std::pair<std::string, std::string>> values = {
      {"train.steps", "7"},          {"train.batch_size", "3"},      {"train.lr", "0.5"},
      {"train.min_lr", "0.25"},      {"train.warmup", "2"},          {"train.weight_decay", "0.125"},
      {"train.decay_vectors", "1"},  {"train.beta1", "0.5"},         {"train.beta2", "0.75"},
      {"train.eps", "0.001"},        {"train.grad_clip", "2"},       {"train.eval_every", "9"},
      {"train.log_every", "11"},     {"train.target", "0.5"},        {"train.select_by", "loss"},
      {"train.schedule_stage", "4"}, {"train.checkpoint_every", "6"}, {"train.keep_checkpoints", "5"},
      {"train.skip_nonfinite", "1"}, {"train.dtype", "bf16"}};
  for (const auto& [key, value] : values) config.set(key, value, "test");
  const TrainConfig t = train_config_from(config);
  EXPECT_EQ(t.steps, 7);
  EXPECT_EQ(t.batch_size, 3);
  EXPECT_EQ(t.optimizer.lr, 0.5);
  EXPECT_EQ(t.min_lr, 0.25);
  EXPECT_EQ(t.warmup_steps, 2);
  EXPECT_EQ(t.optimizer.weight_decay, 0.125);
  EXPECT_TRUE(t.optimizer.decay_vectors);
  EXPECT_EQ(t.optimizer.beta1, 0.5);
  EXPECT_EQ(t.optimizer.beta2, 0.75);
  EXPECT_EQ(t.optimizer.eps, 0.001);
  EXPECT_EQ(t.grad_clip, 2);
  EXPECT_EQ(t.eval_every, 9);
  EXPECT_EQ(t.log_every, 11);
  EXPECT_EQ(t.target, 0.5);
  EXPECT_EQ(t.select_by, "loss");
  EXPECT_EQ(t.schedule_stage, 4);
  EXPECT_EQ(t.checkpoint_every, 6);
  EXPECT_EQ(t.keep_checkpoints, 5);
  EXPECT_TRUE(t.skip_nonfinite);
  EXPECT_EQ(t.precision, Precision::bf16);
  // And every numeric key of the schema is one of them (a new key must be read, and listed here).
  size_t train_keys = 0;
  for (const OptionInfo& o : run_config_schema())
    if (o.key.rfind("train.", 0) == 0) ++train_keys;
  EXPECT_EQ(train_keys, values.size());
}

}  // namespace
}  // namespace seqmix
