#include "seqmix/train/schedule.h"

#include <algorithm>
#include <cmath>

namespace seqmix {

double Schedule::lr_at(int64_t step) const {
  if (stage_steps > 1) step -= step % stage_steps;
  if (warmup_steps > 0 && step < warmup_steps)
    return peak_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - warmup_steps);
  const double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  return min_lr + 0.5 * (peak_lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace seqmix
