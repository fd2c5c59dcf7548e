#include "seqmix/ops/prior_read.h"

#include <ATen/ATen.h>

namespace seqmix::ops {

at::Tensor normalised_read(const PriorRead& read, double eps) {
  const auto den = read.normaliser.clamp_min(eps);
  return read.numerator / (den.dim() == read.numerator.dim() ? den : den.unsqueeze(-1));
}

}  // namespace seqmix::ops
