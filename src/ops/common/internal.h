#pragma once
// The operator functions that operators of other families call (inside the dispatcher already, so not through it),
// declared here because they take an operator's call, which the public headers cannot name.
#include "operator_calls.h"

namespace seqmix::ops {

// seqmix::normalised_read (prior_read.cpp): numerator / max(normaliser, eps), [B,T,H,dv] or [B,T,C]; the normaliser
// [B,T,H] is broadcast over dv. Every linear prior's FEM read and ELA's linear form end with it.
at::Tensor normalised_read_op(const NormalisedReadCall& call);

}  // namespace seqmix::ops
