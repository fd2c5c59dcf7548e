// The FEM paper's toy (App. P) at T=64, D=128, H=4: a single FEM layer (flags LT) learns the
// channel-wise argmax, a single softmax-attention layer cannot (a convex read).
#include <gtest/gtest.h>

#include <filesystem>

#include "seqmix/io/config.h"
#include "seqmix/train/run.h"

namespace seqmix {
namespace {

double final_index_accuracy(const std::string& mixer) {
  Config config(run_config_schema());
  config.set("task", "argmax:seq_len=64,dim=128", "test");
  config.set("mixer", mixer, "test");
  const auto dir = std::filesystem::temp_directory_path() / ("seqmix-argmax-" + std::to_string(::getpid()) + "-" +
                                                             mixer.substr(0, mixer.find(':')));
  std::filesystem::remove_all(dir);
  Run run = build_run(config, dir.string());
  run.train.quiet = true;
  return train(*run.model, *run.task, run.train).final_metrics.at("index_accuracy");
}

TEST(ArgmaxToy, FemSelectsPerChannelAndSoftmaxCannot) {
  EXPECT_GE(final_index_accuracy("fem:prior=softmax,flags=LT,heads=4"), 0.95);
  EXPECT_LE(final_index_accuracy("softmax:heads=4"), 0.10);
}

}  // namespace
}  // namespace seqmix
