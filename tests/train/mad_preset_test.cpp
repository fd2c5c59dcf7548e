// The MAD presets (include/seqmix/train/mad.h): the paper preset is MAD's protocol (66 settings, each a
// one-field variation of its task's baseline, the 6-point lr x wd sweep, 200 epochs of batch 128), the cpu
// preset one baseline setting per task; every setting is a task spec the registry accepts.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "seqmix/io/spec.h"
#include "seqmix/tasks/task.h"
#include "seqmix/train/mad.h"
#include "support/error_of.h"

namespace seqmix {
namespace {

using seqmix::testing::error_of;

// Every option of a task setting, defaults filled in: "key" -> "value".
std::map<std::string, std::string> resolved_fields(const std::string& setting) {
  const Spec resolved = Spec::parse(component_options(task_infos(), "task", setting).resolved());
  return {resolved.options.begin(), resolved.options.end()};
}

TEST(MadPreset, PaperPresetIsMadsProtocol) {
  const MadPreset p = mad_preset("paper");
  ASSERT_EQ(p.tasks.size(), 6u);
  size_t settings = 0;
  for (const auto& plan : p.tasks) {
    settings += plan.settings.size();
    EXPECT_EQ(plan.epochs, 200) << plan.task;
  }
  EXPECT_EQ(settings, 66u);
  EXPECT_EQ(p.batch_size, 128);
  std::set<std::pair<double, double>> sweep;
  for (const auto& point : p.sweep) sweep.insert({point.lr, point.weight_decay});
  const std::set<std::pair<double, double>> mads = {{1e-4, 0.0}, {1e-4, 0.1}, {5e-4, 0.0},
                                                    {5e-4, 0.1}, {1e-3, 0.0}, {1e-3, 0.1}};
  EXPECT_EQ(sweep, mads);
}

// Each setting after a task's first (its baseline) differs from the baseline in exactly one field, and no two
// settings of a task are the same: a variation that repeated a key the baseline sets, or restated the
// baseline's own value, would break this.
TEST(MadPreset, PaperSettingsVaryOneFieldOfTheBaseline) {
  for (const auto& plan : mad_preset("paper").tasks) {
    ASSERT_FALSE(plan.settings.empty()) << plan.task;
    const auto baseline = resolved_fields(plan.settings.front());
    std::set<std::map<std::string, std::string>> distinct{baseline};
    for (size_t i = 1; i < plan.settings.size(); ++i) {
      const std::string& setting = plan.settings[i];
      ASSERT_EQ(error_of([&] { resolved_fields(setting); }), "") << setting;
      const auto fields = resolved_fields(setting);
      int differing = 0;
      for (const auto& [key, value] : fields) differing += baseline.at(key) != value;
      EXPECT_EQ(differing, 1) << setting;
      EXPECT_TRUE(distinct.insert(fields).second) << setting << " repeats another setting of " << plan.task;
    }
  }
}

TEST(MadPreset, CpuPresetIsOneBaselineSettingPerTask) {
  const MadPreset p = mad_preset("cpu");
  ASSERT_EQ(p.tasks.size(), 6u);
  for (const auto& plan : p.tasks) {
    ASSERT_EQ(plan.settings.size(), 1u) << plan.task;
    EXPECT_EQ(error_of([&] { resolved_fields(plan.settings.front()); }), "") << plan.settings.front();
    EXPECT_EQ(Spec::parse(plan.settings.front()).name, plan.task);
  }
  ASSERT_EQ(p.sweep.size(), 1u);
  EXPECT_EQ(p.batch_size, 64);
}

TEST(MadPreset, UnknownPresetIsAClearError) {
  EXPECT_EQ(error_of([] { mad_preset("huge"); }), "unknown MAD preset 'huge'; valid presets: cpu, paper");
}

}  // namespace
}  // namespace seqmix
