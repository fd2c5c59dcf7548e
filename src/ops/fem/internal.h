#pragma once
// What the fem family's files share that include/seqmix/ops/fem.h does not show (it takes an operator's call).
#include "../common/operator_calls.h"
#include "seqmix/ops/fem.h"

namespace seqmix::ops {

// seqmix::fem_scale_values (naive.cpp), which declare.cpp registers and the naive softmax read and
// fem_free_energy_read inside an operator call directly: (clipped, scaled), v clamped to [-cap/beta, cap/beta]
// (v itself, copied, when cap = 0) and u = beta * clipped. v [...,C], beta [C] > 0. The clamp uses minimum/maximum so
// beta gets a gradient through the limit.
FemScaleValuesCall::Result fem_scale_values_op(const FemScaleValuesCall& call);
inline FemValues values_of(const FemScaleValuesCall::Result& r) { return {std::get<0>(r), std::get<1>(r)}; }

}  // namespace seqmix::ops
