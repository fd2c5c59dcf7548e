#include "seqmix/ops/prior_read.h"

#include <ATen/ATen.h>

#include "checks.h"

namespace seqmix::ops {

at::Tensor native::normalised_read(const PriorRead& read, double eps) {
  const char* op = "normalised_read";
  TORCH_CHECK(read.numerator.defined() && read.normaliser.defined(), op,
              ": needs both the numerator and the normaliser of the read");
  check_eps(op, eps);
  const auto numerator_shape = read.numerator.sizes(), normaliser_shape = read.normaliser.sizes();
  const bool per_channel = normaliser_shape == numerator_shape;
  const bool per_head = !numerator_shape.empty() && normaliser_shape == numerator_shape.slice(0, numerator_shape.size() - 1);
  TORCH_CHECK(per_channel || per_head, op, ": the normaliser must have the numerator's shape ", numerator_shape,
              " (per channel) or that shape without its last axis (per head) (got ", normaliser_shape, ")");
  const auto den = read.normaliser.clamp_min(eps);
  return read.numerator / (den.dim() == read.numerator.dim() ? den : den.unsqueeze(-1));
}

}  // namespace seqmix::ops
