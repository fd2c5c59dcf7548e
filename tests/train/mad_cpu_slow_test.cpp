// Learning test: MAD's cpu preset, softmax attention with RoPE on in-context recall reaches >= 0.9.
#include <gtest/gtest.h>

#include <filesystem>

#include "seqmix/train/mad.h"

namespace seqmix {
namespace {

TEST(MadCpuPreset, SoftmaxWithRopeLearnsInContextRecall) {
  const auto dir = std::filesystem::temp_directory_path() / ("seqmix-mad-cpu-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  MadOptions o;
  o.mixers = {"softmax:rope=1"};
  o.tasks = {"mad.in_context_recall"};
  o.preset = "cpu";
  o.out_dir = dir.string();
  o.quiet = true;
  const auto rows = run_mad(o);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_GE(rows[0].scores.at("mad.in_context_recall"), 0.9);
  EXPECT_TRUE(std::filesystem::exists(dir / "mad.md"));
  EXPECT_TRUE(std::filesystem::exists(dir / "mad.json"));
}

}  // namespace
}  // namespace seqmix
