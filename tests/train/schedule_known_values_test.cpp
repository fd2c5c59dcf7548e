// The learning-rate schedule at hand-computed values: linear warmup to the peak (the update at step s < warmup
// uses peak * (s + 1) / warmup), cosine from the peak at step `warmup` to min_lr at `total_steps`
// (lr = min + (peak - min) / 2 * (1 + cos(pi * (s - warmup) / (total - warmup))), held at min_lr after), and with
// stage_steps > 1 the rate of a stage's first step held for the whole stage (docs/cli.md `train.schedule_stage`).
// The numbers are written out, not recomputed from the formula, so a change of convention fails here.
#include <gtest/gtest.h>

#include <cmath>

#include "seqmix/train/schedule.h"

namespace seqmix {
namespace {

void expect_lr(const Schedule& s, int64_t step, double expected) {
  EXPECT_NEAR(s.lr_at(step), expected, 1e-13 * std::abs(expected) + 1e-300) << "step " << step;
}

TEST(ScheduleKnownValues, WarmupThenCosineToMinLr) {
  // peak 3e-3, min 3e-4, 5 warmup steps, 25 steps in all: the cosine runs over steps 5..25 (20 steps).
  const Schedule s{3e-3, 3e-4, 5, 25, 1};
  expect_lr(s, 0, 6e-4);                    // 3e-3 * 1/5
  expect_lr(s, 2, 1.8e-3);                  // 3e-3 * 3/5
  expect_lr(s, 4, 3e-3);                    // warmup - 1: 3e-3 * 5/5
  expect_lr(s, 5, 3e-3);                    // warmup: progress 0
  expect_lr(s, 10, 2.604594154601839e-3);   // progress 1/4: 3e-4 + 1.35e-3 * (1 + cos(pi/4)) = 3e-4 + 1.35e-3 * 1.70710678
  expect_lr(s, 15, 1.65e-3);                // middle, progress 1/2: 3e-4 + 1.35e-3
  expect_lr(s, 24, 3.1662074019656413e-4);  // last, progress 19/20: 3e-4 + 1.35e-3 * (1 - cos(pi/20)) = 3e-4 + 1.35e-3 * 0.01231166
  expect_lr(s, 25, 3e-4);                   // total_steps: min_lr
  expect_lr(s, 40, 3e-4);                   // past the end: held at min_lr
}

TEST(ScheduleKnownValues, NoWarmupStartsAtThePeak) {
  const Schedule s{2.0, 0.0, 0, 10, 1};
  expect_lr(s, 0, 2.0);
  expect_lr(s, 5, 1.0);                     // progress 1/2
  expect_lr(s, 9, 0.04894348370484647);     // progress 9/10: 1 + cos(0.9 pi) = 1 - 0.95105652
  expect_lr(s, 10, 0.0);
}

TEST(ScheduleKnownValues, HeldWithinStages) {
  // Stages of 4 steps: every step uses the rate of its stage's first step (0, 4, 8, ...). Warmup 8, 40 steps:
  // the cosine runs over steps 8..40 (32 steps).
  const Schedule s{1.0, 0.1, 8, 40, 4};
  expect_lr(s, 0, 0.125);                   // 1 * 1/8
  expect_lr(s, 3, 0.125);                   // same stage as step 0
  expect_lr(s, 4, 0.625);                   // 1 * 5/8
  expect_lr(s, 7, 0.625);                   // warmup - 1, in the stage of step 4
  expect_lr(s, 8, 1.0);                     // warmup: the peak
  expect_lr(s, 11, 1.0);
  expect_lr(s, 20, 0.7222075445642904);     // progress 12/32: 0.1 + 0.45 * (1 + cos(3 pi/8)) = 0.1 + 0.45 * 1.38268343
  expect_lr(s, 23, 0.7222075445642904);     // same stage as step 20
  expect_lr(s, 24, 0.55);                   // middle: progress 16/32
  expect_lr(s, 27, 0.55);
  expect_lr(s, 39, 0.13425421036992097);    // last step, stage of 36: progress 28/32, 0.1 + 0.45 * (1 + cos(7 pi/8))
  expect_lr(s, 40, 0.1);                    // min_lr
}

}  // namespace
}  // namespace seqmix
