// Summaries over seeds (include/seqmix/train/seeds.h, mad_mean_over_seeds): known means and sample standard
// deviations, and a MAD cell that one seed has not finished stays empty instead of averaging the others.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "seqmix/train/mad.h"
#include "seqmix/train/seeds.h"
#include "support/error_of.h"

namespace seqmix {
namespace {

using seqmix::testing::error_of;

TEST(Seeds, MeanAndSampleStdKnownValues) {
  const MeanStd m = mean_and_sample_std({1.0, 2.0, 3.0, 4.0});
  EXPECT_DOUBLE_EQ(m.mean, 2.5);
  EXPECT_DOUBLE_EQ(m.std, std::sqrt(5.0 / 3.0));  // squares 2.25 + 0.25 + 0.25 + 2.25 = 5 over n - 1 = 3
  const MeanStd one = mean_and_sample_std({0.7});
  EXPECT_DOUBLE_EQ(one.mean, 0.7);
  EXPECT_EQ(one.std, 0.0);
  EXPECT_EQ(join_seeds(std::vector<uint64_t>{12345, 1, 2}), "12345,1,2");
}

MadRow row(const std::string& mixer, std::map<std::string, double> scores, double average) {
  MadRow r;
  r.mixer = mixer;
  r.scores = std::move(scores);
  r.average = average;
  return r;
}

TEST(Seeds, MadCellsAreMeansOverSeedsAndAnUnfinishedSeedLeavesTheCellEmpty) {
  const std::vector<uint64_t> seeds = {12345, 1, 2};
  const std::vector<std::vector<MadRow>> tables = {
      {row("softmax", {{"mad.fuzzy_recall", 0.10}, {"mad.compression", 0.50}}, 0.30), row("fem", {{"mad.fuzzy_recall", 0.9}}, NAN)},
      {row("softmax", {{"mad.fuzzy_recall", 0.20}, {"mad.compression", 0.40}}, 0.30), row("fem", {{"mad.fuzzy_recall", 0.8}}, NAN)},
      {row("softmax", {{"mad.fuzzy_recall", 0.30}, {"mad.compression", 0.60}}, 0.45), row("fem", {}, NAN)},
  };
  const auto rows = mad_mean_over_seeds(seeds, tables);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].mixer, "softmax");
  EXPECT_NEAR(rows[0].scores.at("mad.fuzzy_recall"), 0.2, 1e-15);
  EXPECT_NEAR(rows[0].spread.at("mad.fuzzy_recall"), 0.1, 1e-15);
  EXPECT_NEAR(rows[0].scores.at("mad.compression"), 0.5, 1e-15);
  EXPECT_NEAR(rows[0].spread.at("mad.compression"), 0.1, 1e-15);
  EXPECT_NEAR(rows[0].average, 0.35, 1e-15);
  EXPECT_NEAR(rows[0].average_spread, std::sqrt((0.0025 + 0.0025 + 0.01) / 2), 1e-15);
  EXPECT_DOUBLE_EQ(rows[0].by_seed.at(2).at("mad.compression"), 0.60);
  EXPECT_DOUBLE_EQ(rows[0].by_seed.at(12345).at("average"), 0.30);
  // seed 2 has not finished fem's fuzzy recall: no mean from the other two
  EXPECT_EQ(rows[1].scores.count("mad.fuzzy_recall"), 0u);
  EXPECT_TRUE(std::isnan(rows[1].average));
  const std::string table = mad_table_markdown(rows, {"mad.fuzzy_recall", "mad.compression"});
  EXPECT_NE(table.find("| `softmax` | 0.200 ± 0.100 | 0.500 ± 0.100 | 0.350 ± 0.087 |"), std::string::npos) << table;
  EXPECT_NE(table.find("| `fem` | - | - | - |"), std::string::npos) << table;
}

TEST(Seeds, TablesOfDifferentMixersAreRefused) {
  const std::vector<std::vector<MadRow>> tables = {{row("softmax", {}, NAN)}, {row("fem", {}, NAN)}};
  EXPECT_EQ(error_of([&] { mad_mean_over_seeds({1, 2}, tables); }), "mad: the seeds' tables do not list the same mixers");
}

}  // namespace
}  // namespace seqmix
