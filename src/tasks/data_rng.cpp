#include "seqmix/tasks/data_rng.h"

#include <cmath>
#include <stdexcept>

namespace seqmix {

int64_t DataRng::below(int64_t n) {
  if (n <= 0) throw std::invalid_argument("DataRng::below needs n >= 1");
  const uint64_t range = static_cast<uint64_t>(n);
  const uint64_t limit = UINT64_MAX - UINT64_MAX % range;  // reject the biased tail
  uint64_t x;
  do x = engine_(); while (x >= limit);
  return static_cast<int64_t>(x % range);
}

double DataRng::uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

double DataRng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1;
  do u1 = uniform(); while (u1 <= 0.0);
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2.0 * M_PI * u2);
  has_spare_ = true;
  return r * std::cos(2.0 * M_PI * u2);
}

int64_t DataRng::weighted(const std::vector<double>& weights) {
  double total = 0;
  for (double w : weights) total += w;
  if (!(total > 0)) throw std::invalid_argument("DataRng::weighted needs a positive total weight");
  double x = uniform() * total;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (x < weights[i]) return static_cast<int64_t>(i);
    x -= weights[i];
  }
  for (size_t i = weights.size(); i-- > 0;)
    if (weights[i] > 0) return static_cast<int64_t>(i);
  return 0;
}

uint64_t derive_seed(uint64_t base, uint64_t stream) {
  // splitmix64 of the pair: well-separated streams for nearby labels.
  uint64_t z = base * 0x9E3779B97F4A7C15ULL + stream + 0x632BE59BD9B4E019ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace seqmix
