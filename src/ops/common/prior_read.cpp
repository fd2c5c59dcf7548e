// The normalised read of a linear prior, seqmix::normalised_read (internal.h).
#include <ATen/ATen.h>

#include "checks.h"
#include "internal.h"

namespace seqmix::ops {

void check_fem_prior_read_impl(const char* op, const char* prior, Impl requested, const c10::Device& device) {
  TORCH_CHECK(!(requested == Impl::fused && device.is_cuda()), op, ": impl 'fused' on ", device, " would run ", prior,
              "'s CUDA kernel on the float64 read every fem_<prior>_read runs, and that kernel reads float32, float16 "
              "or bfloat16; impl 'auto', 'chunked' or 'naive' read on a GPU");
}

at::Tensor normalised_read_op(const NormalisedReadCall& call) {
  const char* op = "normalised_read";
  const at::Tensor &numerator = call.numerator, &normaliser = call.normaliser;
  const double eps = call.eps;
  TORCH_CHECK(numerator.defined() && normaliser.defined(), op,
              ": needs both the numerator and the normaliser of the read");
  check_eps(op, eps);
  const auto numerator_shape = numerator.sizes(), normaliser_shape = normaliser.sizes();
  const bool per_channel = normaliser_shape == numerator_shape;
  const bool per_head = !numerator_shape.empty() && normaliser_shape == numerator_shape.slice(0, numerator_shape.size() - 1);
  TORCH_CHECK(per_channel || per_head, op, ": the normaliser must have the numerator's shape ", numerator_shape,
              " (per channel) or that shape without its last axis (per head) (got ", normaliser_shape, ")");
  const auto den = normaliser.clamp_min(eps);
  return numerator / (den.dim() == numerator.dim() ? den : den.unsqueeze(-1));
}

}  // namespace seqmix::ops
