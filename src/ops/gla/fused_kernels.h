#pragma once
// The raw kernels of the fused GLA scan (fused.cpp, compiled without torch/torch.h), joined by autograd.cpp.
#include <ATen/core/Tensor.h>

#include <vector>

#include "../common/operator_calls.h"
#include "../common/packing.h"

namespace seqmix::ops::gla_kernel {

// Positions per chunk of the scan (the states saved for the backward are one per chunk).
constexpr int64_t kChunk = 64;

// The CPU kernels of seqmix::_gla_forward and _gla_backward (autograd.cpp registers them).
// {numerator [B,T,H,dv], normaliser [B,T,H], states [B,H,chunks,dk,dv+1]} (the state entering each chunk).
// log_decay [B,T,H] runs the chunked scan (fused.cpp), [B,T,H,dk] the per-key scan (fused_per_key.cpp).
// cu_seqlens (int64 [N+1]) or none: packed sequences, each scanned from a zero state.
std::vector<at::Tensor> gla_fused_forward(const GlaForwardCall& call);
// {dq, dk, dv, dlog_decay}
std::vector<at::Tensor> gla_fused_backward(const GlaBackwardCall& call);

// One call's sizes and chunks, shared by the per-head and the per-key scan.
struct ScanDims {
  int64_t B, T, H, dk, dv;
  std::vector<Chunk> chunks;  // in scan order (sequence_chunks of kChunk)
  int64_t capacity;           // the states' chunk axis (chunk_capacity)
  int64_t width() const { return dv + 1; }  // augmented value width: [v, 1]
};
ScanDims scan_dims(const at::Tensor& q, const at::Tensor& v, const at::Tensor& cu_seqlens);

// The per-key scan (fused_per_key.cpp, log_decay [B,T,H,dk]) on contiguous inputs, into outputs allocated by
// gla_fused_forward / gla_fused_backward (the same layouts as the per-head scan's).
void per_key_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_decay,
                     const at::Tensor& numerator, const at::Tensor& normaliser, const at::Tensor& states,
                     const ScanDims& d);
void per_key_backward(const at::Tensor& grad_numerator, const at::Tensor& grad_normaliser, const at::Tensor& q,
                      const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_decay, const at::Tensor& states,
                      const at::Tensor& dq, const at::Tensor& dk, const at::Tensor& dv, const at::Tensor& dlog_decay,
                      const ScanDims& d);

}  // namespace seqmix::ops::gla_kernel
