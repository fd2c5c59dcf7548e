#pragma once
// The kernels behind aft_fused (fused.cpp), joined by the autograd Function in autograd.cpp.
#include <ATen/core/Tensor.h>

#include <vector>

#include "../common/operator_calls.h"

namespace seqmix::ops {

// The CPU kernels of seqmix::_aft_forward and _aft_backward (autograd.cpp registers them).
// {numerator, normaliser, key_max}, all [B,T,C]: the causal running max key_max (-1e30 before the first real
// token) is what the backward needs besides the outputs.
// cu_seqlens (int64 [N+1]) or none: packed sequences, each scanned from a fresh state.
std::vector<at::Tensor> aft_fused_forward(const AftForwardCall& call);

// Gradients {dk, dv} [B,T,C] from the upstream gradients of numerator and normaliser [B,T,C].
std::vector<at::Tensor> aft_fused_backward(const AftBackwardCall& call);

}  // namespace seqmix::ops
