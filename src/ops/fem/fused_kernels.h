#pragma once
// The raw kernels of the fused FEM softmax read (fused.cpp), joined by autograd.cpp.
#include <ATen/core/Tensor.h>

#include <vector>

#include "../common/operator_calls.h"
#include "seqmix/ops/fem.h"

namespace seqmix::ops {

// Shift floor of the exp branch: n_j >= cap - kFemShiftSpan keeps exp(u - n) <= exp(kFemShiftSpan) for
// keys not yet in the running max, so float32 sums cannot overflow (derivation in README.md).
constexpr double kFemShiftSpan = kFemFusedMaxCap;

// The CPU kernels of seqmix::_fem_softmax_forward and _backward (autograd.cpp registers them).
// q [B,T,H,dk], k [B,S,H,dk], v [B,S,H,dv], beta [H*dv] > 0; the kernel clamps v to +-cap/beta itself.
// Returns {mean mu [B,T,H,dv], free_energy F = L / beta with L = log sum_i P_ti exp(u_i) [B,T,H,dv], lse: the row
// log-sum-exp of the scores [B,H,T]}: in the inputs' dtype on the CPU; float32 from the CUDA kernel (fused_cuda.cpp)
// (which reads bfloat16 or float16): the backward recomputes L = beta F, which a bfloat16 F would leave 2^-8 |L| off.
std::vector<at::Tensor> fem_softmax_read_fused_forward(const FemSoftmaxForwardCall& call);
// Gradients {dq, dk, dv, dbeta} from those of mean and free_energy (either may be undefined: zero), given the
// forward's mean, free_energy and lse.
std::vector<at::Tensor> fem_softmax_read_fused_backward(const FemSoftmaxBackwardCall& call);

}  // namespace seqmix::ops
