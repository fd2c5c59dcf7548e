#pragma once
// Deterministic random numbers for data generation: the same seed gives the same examples on every
// platform (std::mt19937_64 is fully specified; the distributions here are written out, not taken
// from the standard library, whose algorithms are implementation-defined).
#include <cstdint>
#include <random>
#include <vector>

namespace seqmix {

class DataRng {
 public:
  explicit DataRng(uint64_t seed) : engine_(seed) {}
  // Uniform integer in [0, n), n >= 1, without modulo bias.
  int64_t below(int64_t n);
  // Uniform real in [0, 1).
  double uniform();
  // Standard normal (Box-Muller).
  double normal();
  // Fisher-Yates shuffle.
  template <typename T>
  void shuffle(std::vector<T>& items) {
    for (int64_t i = static_cast<int64_t>(items.size()) - 1; i > 0; --i) std::swap(items[i], items[below(i + 1)]);
  }
  // Index drawn with probability proportional to weights (non-negative, positive sum).
  int64_t weighted(const std::vector<double>& weights);

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// Seed of an independent stream: mixes a base seed with a stream label (e.g. "train", a batch index).
uint64_t derive_seed(uint64_t base, uint64_t stream);

}  // namespace seqmix
