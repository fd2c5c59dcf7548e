#pragma once
// The operator functions that operators of other families call (inside the dispatcher already, so not through it),
// declared here because they take an operator's call, which the public headers cannot name; and the check the FEM
// reads through a linear prior share.
#include "operator_calls.h"
#include "seqmix/ops/impl.h"

namespace seqmix::ops {

// seqmix::normalised_read (prior_read.cpp): numerator / max(normaliser, eps), [B,T,H,dv] or [B,T,C]; the normaliser
// [B,T,H] is broadcast over dv. Every linear prior's FEM read and ELA's linear form end with it.
at::Tensor normalised_read_op(const NormalisedReadCall& call);

// fem_<prior>_read reads its prior in float64 (fem_capped_read), which the prior's CUDA kernel does not read (float32,
// float16, bfloat16): impl 'fused' on a CUDA device is refused in one line naming `op` and the impls that read there
// (auto takes the chunked form there). Meta tensors pass: the kernels' Meta functions read any dtype.
void check_fem_prior_read_impl(const char* op, const char* prior, Impl requested, const c10::Device& device);

}  // namespace seqmix::ops
