// Fashion-MNIST (Debian's dataset-fashion-mnist; skipped when it is not installed): a small ViT with bidirectional
// softmax attention, trained 400 steps of 64 images, classifies the validation images well above chance (0.1), and
// so does its FEM-SM twin: at least 0.55 each (softmax measured 0.672). The learning test of the fashion_mnist task
// and the vit model.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "seqmix/io/config.h"
#include "seqmix/train/run.h"

namespace seqmix {
namespace {

double validation_accuracy(const std::string& mixer) {
  Config config(run_config_schema());
  config.set("task", "fashion_mnist:patch=7", "test");
  config.set("model", "vit:dim=32,layers=2", "test");
  config.set("mixer", mixer, "test");
  config.set("train.steps", "400", "test");
  config.set("train.batch_size", "64", "test");
  config.set("train.eval_every", "0", "test");
  Run run = build_run(config, "");
  run.train.quiet = true;
  const double accuracy = train(*run.model, *run.task, run.train).final_metrics.at("accuracy");
  std::printf("%s: validation accuracy %.4f\n", mixer.c_str(), accuracy);
  return accuracy;
}

TEST(FashionMnistVit, LearnsWellAboveChance) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist")) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  EXPECT_GE(validation_accuracy("softmax:causal=0,heads=2"), 0.55);
  EXPECT_GE(validation_accuracy("fem:prior=softmax,causal=0,heads=2"), 0.55);
}

}  // namespace
}  // namespace seqmix
