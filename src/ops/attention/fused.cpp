// Flash-style softmax attention on the CPU: blocked over queries and keys with an online softmax, no
// T x T tensor; the forward saves only the row log-sum-exp, the backward recomputes the probabilities
// block by block. Parallel over (batch, head, query block) forward and (batch, head) backward; the
// block products run on the packed block GEMM (block_gemm.cpp). Derivation in README.md.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <limits>

#include "../common/checks.h"
#include "../common/kernel_utils.h"
#include "flash_common.h"
#include "seqmix/ops/attention.h"

namespace seqmix::ops {
namespace {

constexpr int64_t kBlockQ = kFlashBlockQ;
constexpr int64_t kBlockK = kFlashBlockK;

template <typename T>
void forward_kernel(const T* q, const T* k, const T* v, T* o, T* lse, int64_t B, int64_t Tq, int64_t S, int64_t H,
                    int64_t dk, int64_t dv, T scale, const Visibility& vis) {
  const int64_t nqb = (Tq + kBlockQ - 1) / kBlockQ;
  const T minus_inf = -std::numeric_limits<T>::infinity();
  at::parallel_for(0, B * H * nqb, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> score_buf, acc_buf, m_buf, l_buf, alpha_buf;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / (H * nqb), h = (task / nqb) % H, qb = task % nqb;
      const int64_t r0 = qb * kBlockQ, r1 = std::min(Tq, r0 + kBlockQ), nr = r1 - r0;
      const T* Q = q + ((b * Tq + r0) * H + h) * dk;
      T* score = kernel::scratch(score_buf, static_cast<size_t>(kBlockQ * kBlockK));
      T* acc = kernel::scratch(acc_buf, static_cast<size_t>(kBlockQ * dv));
      T* m = kernel::scratch(m_buf, kBlockQ);
      T* l = kernel::scratch(l_buf, kBlockQ);
      T* alpha = kernel::scratch(alpha_buf, kBlockQ);
      std::fill(acc, acc + nr * dv, T(0));
      std::fill(m, m + nr, minus_inf);
      std::fill(l, l + nr, T(0));
      const int64_t limit = vis.last_key(r1 - 1, S);
      for (int64_t k0 = vis.first_key(r0); k0 <= limit; k0 += kBlockK) {
        const int64_t k1 = std::min(limit + 1, k0 + kBlockK), nk = k1 - k0;
        const T* K = k + ((b * S + k0) * H + h) * dk;
        const T* V = v + ((b * S + k0) * H + h) * dv;
        kernel::gemm(false, true, nr, nk, dk, scale, Q, H * dk, K, H * dk, T(0), score, nk);
        vis.mask_block(score, b, r0, nr, k0, nk, S);
        online_softmax_block(score, nr, nk, m, l, alpha);
        for (int64_t i = 0; i < nr; ++i)
          if (alpha[i] != T(1))
            for (int64_t c = 0; c < dv; ++c) acc[i * dv + c] *= alpha[i];
        kernel::gemm(false, false, nr, dv, nk, T(1), score, nk, V, H * dv, T(1), acc, dv);
      }
      for (int64_t i = 0; i < nr; ++i) {
        T* out = o + ((b * Tq + r0 + i) * H + h) * dv;
        const T inv = l[i] > 0 ? T(1) / l[i] : T(0);
        for (int64_t c = 0; c < dv; ++c) out[c] = acc[i * dv + c] * inv;
        lse[(b * H + h) * Tq + r0 + i] = l[i] > 0 ? m[i] + std::log(l[i]) : minus_inf;
      }
    }
  });
}

template <typename T>
void backward_kernel(const T* q, const T* k, const T* v, const T* o, const T* lse, const T* dout, T* dq, T* dk_out,
                     T* dv_out, int64_t B, int64_t Tq, int64_t S, int64_t H, int64_t dk, int64_t dv, T scale,
                     const Visibility& vis) {
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> p_buf, dp_buf, dka_buf, dva_buf, delta_buf;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / H, h = task % H;
      const T* L = lse + (b * H + h) * Tq;
      // delta_t = sum_c dO_tc O_tc
      T* delta = kernel::scratch(delta_buf, static_cast<size_t>(Tq));
      for (int64_t t = 0; t < Tq; ++t) {
        const T* go = dout + ((b * Tq + t) * H + h) * dv;
        const T* oo = o + ((b * Tq + t) * H + h) * dv;
        T s = 0;
        for (int64_t c = 0; c < dv; ++c) s += go[c] * oo[c];
        delta[t] = s;
      }
      T* P = kernel::scratch(p_buf, static_cast<size_t>(kBlockQ * kBlockK));
      T* dP = kernel::scratch(dp_buf, static_cast<size_t>(kBlockQ * kBlockK));
      T* dK = kernel::scratch(dka_buf, static_cast<size_t>(kBlockK * dk));
      T* dV = kernel::scratch(dva_buf, static_cast<size_t>(kBlockK * dv));
      for (int64_t k0 = 0; k0 < S; k0 += kBlockK) {
        const int64_t k1 = std::min(S, k0 + kBlockK), nk = k1 - k0;
        const T* K = k + ((b * S + k0) * H + h) * dk;
        const T* V = v + ((b * S + k0) * H + h) * dv;
        std::fill(dK, dK + nk * dk, T(0));
        std::fill(dV, dV + nk * dv, T(0));
        // First query that can see key k0: t + offset >= k0.
        const int64_t rows_end = vis.last_query(k1 - 1, Tq) + 1;  // no later query sees the block
        for (int64_t r0 = first_query_block_row(vis, k0, kBlockQ); r0 < rows_end; r0 += kBlockQ) {
          const int64_t r1 = std::min(Tq, r0 + kBlockQ), nr = r1 - r0;
          const T* Q = q + ((b * Tq + r0) * H + h) * dk;
          const T* dO = dout + ((b * Tq + r0) * H + h) * dv;
          kernel::gemm(false, true, nr, nk, dk, scale, Q, H * dk, K, H * dk, T(0), P, nk);
          vis.mask_block(P, b, r0, nr, k0, nk, S);
          recompute_probabilities(P, nr, nk, L + r0);
          kernel::gemm(true, false, nk, dv, nr, T(1), P, nk, dO, H * dv, T(1), dV, dv);
          kernel::gemm(false, true, nr, nk, dv, T(1), dO, H * dv, V, H * dv, T(0), dP, nk);
          softmax_backward_block(dP, P, nr, nk, delta + r0);
          kernel::gemm(false, false, nr, dk, nk, scale, dP, nk, K, H * dk, T(1), dq + ((b * Tq + r0) * H + h) * dk, H * dk);
          kernel::gemm(true, false, nk, dk, nr, scale, dP, nk, Q, H * dk, T(1), dK, dk);
        }
        for (int64_t j = 0; j < nk; ++j) {
          std::copy(dK + j * dk, dK + (j + 1) * dk, dk_out + ((b * S + k0 + j) * H + h) * dk);
          std::copy(dV + j * dv, dV + (j + 1) * dv, dv_out + ((b * S + k0 + j) * H + h) * dv);
        }
      }
    }
  });
}

}  // namespace

AttentionForward softmax_attention_fused_forward(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                                                 bool causal, double scale, const at::Tensor& key_mask,
                                                 const at::Tensor& cu_seqlens) {
  check_flash_args("softmax_attention_fused", q_in, k_in, v_in, key_mask, scale, cu_seqlens);
  auto q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  const auto mask = key_mask.defined() ? key_mask.contiguous() : at::Tensor();
  const int64_t B = q.size(0), T = q.size(1), S = k.size(1), H = q.size(2), dk = q.size(3), dv = v.size(3);
  auto out = at::empty({B, T, H, dv}, q.options());
  auto lse = at::empty({B, H, T}, q.options());
  const Visibility vis(causal, T, S, B, mask.defined() ? mask.data_ptr<bool>() : nullptr, cu_seqlens);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "softmax_attention_fused_forward", [&] {
    forward_kernel<scalar_t>(q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                             out.data_ptr<scalar_t>(), lse.data_ptr<scalar_t>(), B, T, S, H, dk, dv,
                             static_cast<scalar_t>(scale), vis);
  });
  return {out, lse};
}

std::vector<at::Tensor> softmax_attention_fused_backward(const at::Tensor& grad_out, const at::Tensor& q_in,
                                                         const at::Tensor& k_in, const at::Tensor& v_in,
                                                         const at::Tensor& out, const at::Tensor& lse, bool causal,
                                                         double scale, const at::Tensor& key_mask,
                                                         const at::Tensor& cu_seqlens) {
  check_flash_args("softmax_attention_fused_backward", q_in, k_in, v_in, key_mask, scale, cu_seqlens);
  const auto expected_out = std::vector<int64_t>{q_in.size(0), q_in.size(1), q_in.size(2), v_in.size(3)};
  TORCH_CHECK(grad_out.sizes() == expected_out && out.sizes() == expected_out, "softmax_attention_fused_backward: ",
              "grad_out and out must be [B,T,H,dv] = ", at::IntArrayRef(expected_out), " (got ", grad_out.sizes(), " and ",
              out.sizes(), ")");
  TORCH_CHECK(lse.sizes() == at::IntArrayRef({q_in.size(0), q_in.size(2), q_in.size(1)}),
              "softmax_attention_fused_backward: lse must be [B,H,T] (got ", lse.sizes(), ")");
  TORCH_CHECK(grad_out.scalar_type() == q_in.scalar_type() && out.scalar_type() == q_in.scalar_type() &&
                  lse.scalar_type() == q_in.scalar_type(),
              "softmax_attention_fused_backward: grad_out, out and lse must have q's dtype");
  auto q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous(), o = out.contiguous();
  auto go = grad_out.contiguous(), l = lse.contiguous();
  const auto mask = key_mask.defined() ? key_mask.contiguous() : at::Tensor();
  const int64_t B = q.size(0), T = q.size(1), S = k.size(1), H = q.size(2), dk = q.size(3), dv = v.size(3);
  auto dq = at::zeros_like(q), dk_t = at::empty_like(k), dv_t = at::empty_like(v);  // every key row is written
  const Visibility vis(causal, T, S, B, mask.defined() ? mask.data_ptr<bool>() : nullptr, cu_seqlens);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "softmax_attention_fused_backward", [&] {
    backward_kernel<scalar_t>(q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                              o.data_ptr<scalar_t>(), l.data_ptr<scalar_t>(), go.data_ptr<scalar_t>(),
                              dq.data_ptr<scalar_t>(), dk_t.data_ptr<scalar_t>(), dv_t.data_ptr<scalar_t>(), B, T, S, H,
                              dk, dv, static_cast<scalar_t>(scale), vis);
  });
  return {dq, dk_t, dv_t};
}

}  // namespace seqmix::ops
