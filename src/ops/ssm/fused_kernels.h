#pragma once
// The kernels behind ssm_scan_fused (fused.cpp), joined by the autograd Function in autograd.cpp.
#include <ATen/core/Tensor.h>

#include <vector>

#include "../common/operator_calls.h"

namespace seqmix::ops {

// Steps between saved states: the backward recomputes one chunk of this many states at a time.
constexpr int64_t kSsmCheckpointEvery = 64;

// y [B,T,C] and the states entering every chunk, checkpoints [B, ceil(T/64), N, C]
// (checkpoint j = h_{64 j - 1}, zero for j = 0).
struct SsmFusedForward {
  at::Tensor y, checkpoints;
};
// cu_seqlens (int64 [N+1]) or undefined: packed sequences, each scanned from a zero state (checkpoints then
// [B, ceil(T/64) + N, N, C]).
SsmFusedForward ssm_scan_fused_forward(const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A,
                                       const at::Tensor& b, const at::Tensor& c, const at::Tensor& cu_seqlens = {});

// The CPU kernel of seqmix::_ssm_scan_backward (autograd.cpp registers it): gradients {du, ddelta, dA, db, dc}
// from the upstream gradient of y [B,T,C].
std::vector<at::Tensor> ssm_scan_fused_backward(const SsmScanBackwardCall& call);

}  // namespace seqmix::ops
