#pragma once
// The kernels behind aft_fused (fused.cpp), joined by the autograd Function in autograd.cpp.
#include <ATen/core/Tensor.h>

#include <vector>

namespace seqmix::ops {

// numerator, normaliser and the causal running max key_max, all [B,T,C] (key_max = -1e30 before the
// first real token); key_max is what the backward needs besides the outputs.
struct AftFusedForward {
  at::Tensor numerator, normaliser, key_max;
};
// cu_seqlens (int64 [N+1]) or undefined: packed sequences, each scanned from a fresh state.
AftFusedForward aft_fused_forward(const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                                  const at::Tensor& cu_seqlens = {});

// Gradients {dk, dv} [B,T,C] from the upstream gradients of numerator and normaliser [B,T,C].
std::vector<at::Tensor> aft_fused_backward(const at::Tensor& grad_numerator, const at::Tensor& grad_normaliser,
                                           const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                                           const at::Tensor& numerator, const at::Tensor& normaliser,
                                           const at::Tensor& key_max, const at::Tensor& cu_seqlens = {});

}  // namespace seqmix::ops
