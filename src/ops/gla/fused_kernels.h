#pragma once
// The raw kernels of the fused GLA scan (fused.cpp, compiled without torch/torch.h), joined by autograd.cpp.
#include <ATen/core/Tensor.h>

#include <vector>

namespace seqmix::ops::gla_kernel {

// Positions per chunk of the scan (the states saved for the backward are one per chunk).
constexpr int64_t kChunk = 64;

// {numerator [B,T,H,dv], normaliser [B,T,H], states [B,H,chunks,dk,dv+1]} (the state entering each chunk).
std::vector<at::Tensor> gla_fused_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                          const at::Tensor& log_decay);
// {dq, dk, dv, dlog_decay}
std::vector<at::Tensor> gla_fused_backward(const at::Tensor& grad_numerator, const at::Tensor& grad_normaliser,
                                           const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                           const at::Tensor& log_decay, const at::Tensor& states);

}  // namespace seqmix::ops::gla_kernel
