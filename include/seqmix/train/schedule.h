#pragma once
// Learning-rate schedule: linear warmup from 0 to the peak, then cosine decay to min_lr at total_steps.
#include <cstdint>

namespace seqmix {

struct Schedule {
  double peak_lr = 1e-3;
  double min_lr = 0.0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  int64_t stage_steps = 1;  // the rate is held constant within stages of this many steps (MAD: one epoch)
  // Learning rate for the update made at step (0-based).
  double lr_at(int64_t step) const;
};

}  // namespace seqmix
