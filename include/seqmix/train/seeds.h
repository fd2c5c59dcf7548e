#pragma once
// One home for how seqmix summarises runs that differ only in their seed (`train --seeds`, `mad --seeds`).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace seqmix {

struct MeanStd {
  double mean = 0;
  double std = 0;  // sample standard deviation (n - 1 in the denominator); 0 for a single value
};

inline MeanStd mean_and_sample_std(const std::vector<double>& values) {
  MeanStd out;
  if (values.empty()) return out;
  const double n = static_cast<double>(values.size());
  for (double x : values) out.mean += x / n;
  double squares = 0;
  for (double x : values) squares += (x - out.mean) * (x - out.mean);
  out.std = values.size() > 1 ? std::sqrt(squares / (n - 1)) : 0.0;
  return out;
}

// "0,1,2": how a seed list is printed and recorded.
template <typename Int>
std::string join_seeds(const std::vector<Int>& seeds) {
  std::string out;
  for (Int s : seeds) out += (out.empty() ? "" : ",") + std::to_string(s);
  return out;
}

}  // namespace seqmix
