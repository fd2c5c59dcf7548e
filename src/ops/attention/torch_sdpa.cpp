// PyTorch's own attention kernel, at::scaled_dot_product_attention, with seqmix's semantics: the baseline the
// fused kernel is measured against (seqmix bench --impl torch) and the softmax mixer's impl=torch.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "../common/packing.h"
#include "../common/padding.h"
#include "seqmix/ops/attention.h"

namespace seqmix::ops {

at::Tensor softmax_attention_torch(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                   double scale, const at::Tensor& key_mask, const at::Tensor& cu_seqlens) {
  const char* op = "softmax_attention_torch";
  check_attention_args(op, q, k, v);
  check_key_mask(op, key_mask, k.size(0), k.size(1));
  check_packed_attention(op, q, k, key_mask, cu_seqlens);
  check_scale(op, scale);
  const AttentionInputs in = finite_masked_positions(op, q, k, v, key_mask);
  // SDPA's is_causal aligns query t with key t (top-left); seqmix's queries are the last T of S keys, so
  // anything but a plain causal T == S read passes the visible keys as a bool mask (true = attend).
  const bool plain_causal = causal && !key_mask.defined() && !cu_seqlens.defined() && q.size(1) == k.size(1);
  std::optional<at::Tensor> visible;  // none (not an undefined tensor: SDPA would call that a mask)
  if (!plain_causal) {
    // Packed sequences: the block-diagonal mask (SDPA's CPU kernel has no variable-length form).
    const at::Tensor mask = visible_keys(q.size(1), k.size(1), causal, key_mask, q.device(), cu_seqlens);
    if (mask.defined()) visible = mask;
  }
  // [B,T,H,D] <-> SDPA's [B,H,T,D]: transposed views, no copies.
  const auto out = at::scaled_dot_product_attention(in.q.transpose(1, 2), in.k.transpose(1, 2), in.v.transpose(1, 2), visible,
                                                    /*dropout_p=*/0.0, /*is_causal=*/plain_causal, scale);
  return out.transpose(1, 2);
}

}  // namespace seqmix::ops
