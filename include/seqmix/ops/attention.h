#pragma once
// Dot-product attention ops on [B,T,H,D] tensors.
//
// q [B,T,H,dk], k [B,S,H,dk], v [B,S,H,dv] -> [B,T,H,dv]. The T queries are the last T of the S key
// positions (T == S for a full forward, T < S when decoding against a cache), so with causal = true
// query t sees keys j <= t + (S - T).
//
// cu_seqlens (int64 [N+1], 0 = cu_seqlens[0] <= ... <= cu_seqlens[N] = T, flash-linear-attention's and
// flash-attn's convention) packs N sequences into one row, B = 1 and T == S: a query sees only the keys of its
// own sequence, so the packed output equals each sequence run alone. It excludes key_mask (a packed batch has
// no padding).
#include <ATen/core/Tensor.h>

#include <vector>

#include "seqmix/ops/impl.h"
#include "seqmix/ops/operators.h"

namespace seqmix::ops {

// softmax_j(scale * q_t . k_j) v_j, materialising the [B,H,T,S] score matrix. key_mask [B,S] (bool,
// true = a real key) removes padded keys from the support; a query left with no visible key reads its
// own position (its output is a padding output, so any finite value will do).
at::Tensor softmax_attention_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   bool causal, double scale, const at::Tensor& key_mask = {},
                                   const at::Tensor& cu_seqlens = {});

// HyperMLP's "R" read: ReLU(s_t / sqrt(||s_t||^2 + eps)) v, with s_t = (q_t . k_j)_j over the visible keys.
at::Tensor relu_attention_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                bool causal, double eps);

// Fused (flash-style) softmax attention, with the naive op's semantics and a hand-written backward:
// blocked online softmax, no T x T tensor, the row log-sum-exp saved for backward. float32/float64.
at::Tensor softmax_attention_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                   double scale, const at::Tensor& key_mask = {},
                                   const at::Tensor& cu_seqlens = {});

// PyTorch's own kernel, at::scaled_dot_product_attention, with the same semantics (a baseline: its backward
// is PyTorch's).
at::Tensor softmax_attention_torch(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                   double scale, const at::Tensor& key_mask = {},
                                   const at::Tensor& cu_seqlens = {});

// The implementations of torch.ops.seqmix.attention, whose C++ entry point ops::attention (operators.h) is
// generated from its schema, as relu_attention's (relu_attention_naive through the dispatcher) is.
constexpr ImplSet kSoftmaxAttentionImpls{{Impl::fused, Impl::naive, Impl::torch}, {"seqmix::_attention_forward"}};

// The raw kernels behind it (benchmarks and tests): out [B,T,H,dv] and lse [B,H,T]; the backward returns
// dq, dk, dv.
struct AttentionForward {
  at::Tensor out, lse;
};
AttentionForward softmax_attention_fused_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                 bool causal, double scale, const at::Tensor& key_mask = {},
                                   const at::Tensor& cu_seqlens = {});
std::vector<at::Tensor> softmax_attention_fused_backward(const at::Tensor& grad_out, const at::Tensor& q,
                                                         const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                                                         const at::Tensor& lse, bool causal, double scale,
                                                         const at::Tensor& key_mask = {},
                                                         const at::Tensor& cu_seqlens = {});

// [T,S] bool mask, true where query t may see key j (j <= t + S - T).
at::Tensor causal_key_mask(int64_t queries, int64_t keys, const at::Device& device);
// The visible keys of each query: causal and key-padding masks combined, [B or 1, 1, T, S] bool, with
// a query's own position re-admitted where nothing else is visible, and, for packed sequences (cu_seqlens), the
// keys of the query's own sequence only. Undefined when nothing is masked.
at::Tensor visible_keys(int64_t queries, int64_t keys, bool causal, const at::Tensor& key_mask,
                        const at::Device& device, const at::Tensor& cu_seqlens = {});

}  // namespace seqmix::ops
