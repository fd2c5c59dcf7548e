#pragma once
// The raw kernels of the fused FEM softmax read (fused.cpp), joined by autograd.cpp.
#include <ATen/core/Tensor.h>

#include <vector>

#include "seqmix/ops/fem.h"

namespace seqmix::ops {

// Shift floor of the exp branch: n_j >= cap - kFemShiftSpan keeps exp(u - n) <= exp(kFemShiftSpan) for
// keys not yet in the running max, so float32 sums cannot overflow (derivation in README.md).
constexpr double kFemShiftSpan = kFemFusedMaxCap;

// In the inputs' dtype on the CPU; float32 from the CUDA kernel (fused_cuda.cpp) (which reads bfloat16 or float16): the backward
// recomputes L = beta F, which a bfloat16 F would leave 2^-8 |L| off.
struct FemReadForward {
  at::Tensor mean;         // mu [B,T,H,dv]
  at::Tensor free_energy;  // F = L / beta, L = log sum_i P_ti exp(u_i) [B,T,H,dv]
  at::Tensor lse;          // row log-sum-exp of the scores [B,H,T]
};

// q [B,T,H,dk], k [B,S,H,dk], v [B,S,H,dv], beta [H*dv] > 0; the kernel clamps v to +-cap/beta itself.
FemReadForward fem_softmax_read_fused_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                              const at::Tensor& beta, double cap, bool causal, double scale,
                                              const at::Tensor& key_mask);
// Gradients {dq, dk, dv, dbeta} from those of mean and free_energy (either may be undefined: zero).
std::vector<at::Tensor> fem_softmax_read_fused_backward(const at::Tensor& d_mean, const at::Tensor& d_free,
                                                        const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                        const at::Tensor& beta, const FemReadForward& saved, double cap,
                                                        bool causal, double scale, const at::Tensor& key_mask);

}  // namespace seqmix::ops
