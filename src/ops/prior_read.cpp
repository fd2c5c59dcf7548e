#include "seqmix/ops/prior_read.h"

#include <ATen/ATen.h>

namespace seqmix::ops {

at::Tensor normalised_read(const PriorRead& read, double eps) {
  return read.numerator / read.normaliser.clamp_min(eps).unsqueeze(-1);
}

}  // namespace seqmix::ops
