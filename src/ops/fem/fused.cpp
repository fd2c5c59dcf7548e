// The fused FEM softmax read on the CPU: one flash-style pass returns mu and L = beta*F together. Per
// query block it streams key blocks with an online softmax over the scores (row max m, row sum l) and
// reads the packed values [c, exp(u - n)] with one block product, where n is a per-channel running max
// of u over the keys every row of the block sees (so the shift never involves a key after any row:
// exact causality). The backward recomputes probabilities block by block from the saved row
// log-sum-exp and L. Derivation and bounds in README.md.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "../attention/flash_common.h"
#include "../common/kernel_utils.h"
#include "fused_kernels.h"
#include "seqmix/ops/fem.h"

namespace seqmix::ops {
namespace {

constexpr int64_t kBlockQ = kFlashBlockQ;
constexpr int64_t kBlockK = kFlashBlockK;

// Per-channel running max of u over the keys [from, to) of one (b,h), folded into n.
template <typename T>
void fold_channel_max(T* n, const T* u, int64_t from, int64_t to, int64_t row_stride, int64_t dv) {
  for (int64_t j = from; j < to; ++j) {
    const T* uj = u + j * row_stride;
    for (int64_t c = 0; c < dv; ++c) n[c] = uj[c] > n[c] ? uj[c] : n[c];
  }
}

// Packs the key block's values as rows [c_j, exp(u_j - n)] (nk x 2dv).
template <typename T>
void pack_values(T* packed, const T* c, const T* u, const T* n, int64_t nk, int64_t row_stride, int64_t dv) {
  for (int64_t j = 0; j < nk; ++j) {
    T* dst = packed + j * 2 * dv;
    const T* cj = c + j * row_stride;
    const T* uj = u + j * row_stride;
    for (int64_t ch = 0; ch < dv; ++ch) dst[ch] = cj[ch];
    for (int64_t ch = 0; ch < dv; ++ch) dst[dv + ch] = kernel::fast_exp(uj[ch] - n[ch]);
  }
}

// c = clamp(v, -cap/beta, cap/beta) and u = beta c, one pass over [rows, dv] (beta per head and channel).
template <typename T>
void clip_and_scale(const T* v, const T* beta, T* c, T* u, int64_t rows, int64_t H, int64_t dv, T cap) {
  at::parallel_for(0, rows, 256, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* bh = beta + (r % H) * dv;
      for (int64_t ch = 0; ch < dv; ++ch) {
        const T limit = cap / bh[ch], x = v[r * dv + ch];
        const T clipped = x > limit ? limit : (x < -limit ? -limit : x);
        c[r * dv + ch] = clipped;
        u[r * dv + ch] = bh[ch] * clipped;
      }
    }
  });
}

// The clamp and scale in reverse: from dc and du (the read's gradients w.r.t. c and u = beta c) to dv and
// the per-element terms of dbeta. Entries on the limit split their gradient 50/50 between v and the
// limit, as at::minimum / at::maximum do.
template <typename T>
void clip_and_scale_backward(const T* v, const T* beta, const T* c, const T* dc, const T* du, T* dv_out,
                             T* dbeta_terms, int64_t rows, int64_t H, int64_t dv, T cap) {
  at::parallel_for(0, rows, 256, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* bh = beta + (r % H) * dv;
      for (int64_t ch = 0; ch < dv; ++ch) {
        const int64_t i = r * dv + ch;
        const T b = bh[ch], limit = cap / b, x = v[i];
        const T d_clipped = dc[i] + b * du[i];
        // d limit / d beta = -cap / beta^2; c = +limit above, -limit below.
        const T share = x > limit || x < -limit ? T(1) : (x == limit || x == -limit ? T(0.5) : T(0));
        const T sign = x >= limit ? T(1) : T(-1);
        dv_out[i] = (T(1) - share) * d_clipped;
        dbeta_terms[i] = c[i] * du[i] + share * d_clipped * sign * (-cap / (b * b));
      }
    }
  });
}

// Packs every key block of every (b, h) once, shifted by the running max at the block's end,
// M_kb = max(floor, max_{i < k1} u_i) (stored in block_shift [B,H,blocks,dv]): a query block whose rows
// all see the whole key block uses exactly this pack, so only the blocks on its diagonal band are
// packed per query block.
template <typename T>
void pack_key_blocks(const T* c, const T* u, T* packed, T* block_shift, int64_t B, int64_t S, int64_t H, int64_t dv,
                     T shift_floor) {
  const int64_t nkb = (S + kBlockK - 1) / kBlockK, w = 2 * dv;
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / H, h = task % H;
      const T* Cbh = c + (b * S * H + h) * dv;
      const T* Ubh = u + (b * S * H + h) * dv;
      std::vector<T> running(static_cast<size_t>(dv), shift_floor);
      for (int64_t kb = 0; kb < nkb; ++kb) {
        const int64_t k0 = kb * kBlockK, k1 = std::min(S, k0 + kBlockK);
        fold_channel_max(running.data(), Ubh, k0, k1, H * dv, dv);
        std::copy(running.begin(), running.end(), block_shift + (task * nkb + kb) * dv);
        pack_values(packed + (task * S + k0) * w, Cbh + k0 * H * dv, Ubh + k0 * H * dv, running.data(), k1 - k0,
                    H * dv, dv);
      }
    }
  });
}

template <typename T>
void forward_kernel(const T* q, const T* k, const T* c, const T* u, const T* block_packs, const T* block_shift,
                    T* mean, T* log_read, T* lse, int64_t B, int64_t Tq, int64_t S, int64_t H, int64_t dk, int64_t dv,
                    T scale, T shift_floor, const Visibility& vis) {
  const int64_t nqb = (Tq + kBlockQ - 1) / kBlockQ, nkb = (S + kBlockK - 1) / kBlockK, w = 2 * dv;
  const T minus_inf = -std::numeric_limits<T>::infinity();
  at::parallel_for(0, B * H * nqb, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> score_buf, acc_buf, m_buf, l_buf, alpha_buf, n_buf, n_new_buf, gamma_buf, packed_buf;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / (H * nqb), h = (task / nqb) % H, qb = task % nqb;
      const int64_t r0 = qb * kBlockQ, r1 = std::min(Tq, r0 + kBlockQ), nr = r1 - r0;
      const T* Q = q + ((b * Tq + r0) * H + h) * dk;
      T* score = kernel::scratch(score_buf, static_cast<size_t>(kBlockQ * kBlockK));
      T* acc = kernel::scratch(acc_buf, static_cast<size_t>(kBlockQ * w));  // rows [acc_mu, acc_e]
      T* m = kernel::scratch(m_buf, kBlockQ);
      T* l = kernel::scratch(l_buf, kBlockQ);
      T* alpha = kernel::scratch(alpha_buf, kBlockQ);
      T* n = kernel::scratch(n_buf, static_cast<size_t>(dv));
      T* n_new = kernel::scratch(n_new_buf, static_cast<size_t>(dv));
      T* gamma = kernel::scratch(gamma_buf, static_cast<size_t>(dv));
      T* packed = kernel::scratch(packed_buf, static_cast<size_t>(kBlockK * w));
      std::fill(acc, acc + nr * w, T(0));
      std::fill(m, m + nr, minus_inf);
      std::fill(l, l + nr, T(0));
      std::fill(n, n + dv, shift_floor);
      const int64_t limit = vis.last_key(r1 - 1, S);
      const int64_t shared_limit = vis.last_key(r0, S);  // keys up to here are seen by every row of the block
      const T* Ubh = u + (b * S * H + h) * dv;
      for (int64_t k0 = 0; k0 <= limit; k0 += kBlockK) {
        const int64_t k1 = std::min(limit + 1, k0 + kBlockK), nk = k1 - k0;
        const T* K = k + ((b * S + k0) * H + h) * dk;
        kernel::gemm(false, true, nr, nk, dk, scale, Q, H * dk, K, H * dk, T(0), score, nk);
        vis.mask_block(score, b, r0, nr, k0, nk, S);
        online_softmax_block(score, nr, nk, m, l, alpha);
        // The channel shift grows with the keys every row sees; the exp branch is rescaled to it.
        // Every row sees the whole key block (up to its end in the pack, which may lie past k1).
        const bool whole_block_shared = std::min(S, k0 + kBlockK) - 1 <= shared_limit;
        const T* values = packed;
        if (whole_block_shared) {
          const T* shift = block_shift + ((b * H + h) * nkb + k0 / kBlockK) * dv;
          std::copy(shift, shift + dv, n_new);
          values = block_packs + ((b * H + h) * S + k0) * w;
        } else {
          std::copy(n, n + dv, n_new);
          fold_channel_max(n_new, Ubh, k0, std::min(k1, shared_limit + 1), H * dv, dv);
        }
        for (int64_t ch = 0; ch < dv; ++ch) gamma[ch] = kernel::fast_exp(n[ch] - n_new[ch]);
        std::copy(n_new, n_new + dv, n);
        for (int64_t i = 0; i < nr; ++i) {
          T* a = acc + i * w;
          for (int64_t ch = 0; ch < dv; ++ch) a[ch] *= alpha[i];
          for (int64_t ch = 0; ch < dv; ++ch) a[dv + ch] *= alpha[i] * gamma[ch];
        }
        if (!whole_block_shared)
          pack_values(packed, c + ((b * S + k0) * H + h) * dv, Ubh + k0 * H * dv, n, nk, H * dv, dv);
        kernel::gemm(false, false, nr, w, nk, T(1), score, nk, values, w, T(1), acc, w);
      }
      const T tiny = std::numeric_limits<T>::min();
      for (int64_t i = 0; i < nr; ++i) {
        const int64_t at = ((b * Tq + r0 + i) * H + h) * dv;
        const T* a = acc + i * w;
        const T inv = l[i] > 0 ? T(1) / l[i] : T(0);
        const T log_l = l[i] > 0 ? std::log(l[i]) : T(0);
        for (int64_t ch = 0; ch < dv; ++ch) mean[at + ch] = a[ch] * inv;
        for (int64_t ch = 0; ch < dv; ++ch) log_read[at + ch] = n[ch] + std::log(std::max(a[dv + ch], tiny)) - log_l;
        lse[(b * H + h) * Tq + r0 + i] = l[i] > 0 ? m[i] + log_l : minus_inf;
      }
    }
  });
}

template <typename T>
void backward_kernel(const T* q, const T* k, const T* c, const T* u, const T* mean, const T* log_read, const T* lse,
                     const T* d_mean, const T* d_log, T* dq, T* dk_out, T* dc_out, T* du_out, int64_t B, int64_t Tq,
                     int64_t S, int64_t H, int64_t dk, int64_t dv, T scale, T cap, const Visibility& vis) {
  const int64_t w = 2 * dv;
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> p_buf, dp_buf, dka_buf, dcu_buf, tmp_buf, packed_buf, delta_buf, g_buf;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / H, h = task % H;
      const T* L = lse + (b * H + h) * Tq;
      // One shift for the whole backward: cap. exp(u - cap) lies in [e^{-2 cap}, 1] and exp(cap - L) in
      // [1, e^{2 cap}] (|u|, |L| <= cap), so the values are packed once per (b, h): V'_i = [c_i, exp(u_i - cap)].
      T* packed = kernel::scratch(packed_buf, static_cast<size_t>(S * w));
      const std::vector<T> cap_shift(static_cast<size_t>(dv), cap);
      pack_values(packed, c + (b * S * H + h) * dv, u + (b * S * H + h) * dv, cap_shift.data(), S, H * dv, dv);
      // G_t = [dmu_t, dL_t exp(cap - L_t)] and Delta_t = dmu_t . mu_t + sum_j dL_tj.
      T* G = kernel::scratch(g_buf, static_cast<size_t>(Tq * w));
      T* delta = kernel::scratch(delta_buf, static_cast<size_t>(Tq));
      for (int64_t t = 0; t < Tq; ++t) {
        const int64_t at = ((b * Tq + t) * H + h) * dv;
        T* g = G + t * w;
        T s = 0;
        for (int64_t ch = 0; ch < dv; ++ch) {
          g[ch] = d_mean[at + ch];
          g[dv + ch] = d_log[at + ch] * kernel::fast_exp(cap - log_read[at + ch]);
          s += d_mean[at + ch] * mean[at + ch] + d_log[at + ch];
        }
        delta[t] = s;
      }
      T* P = kernel::scratch(p_buf, static_cast<size_t>(kBlockQ * kBlockK));
      T* dP = kernel::scratch(dp_buf, static_cast<size_t>(kBlockQ * kBlockK));
      T* dK = kernel::scratch(dka_buf, static_cast<size_t>(kBlockK * dk));
      T* dCU = kernel::scratch(dcu_buf, static_cast<size_t>(kBlockK * w));  // rows [dc, du]
      T* tmp = kernel::scratch(tmp_buf, static_cast<size_t>(kBlockK * w));
      for (int64_t k0 = 0; k0 < S; k0 += kBlockK) {
        const int64_t k1 = std::min(S, k0 + kBlockK), nk = k1 - k0;
        const T* K = k + ((b * S + k0) * H + h) * dk;
        std::fill(dK, dK + nk * dk, T(0));
        std::fill(dCU, dCU + nk * w, T(0));
        for (int64_t r0 = first_query_block_row(vis, k0, kBlockQ); r0 < Tq; r0 += kBlockQ) {
          const int64_t r1 = std::min(Tq, r0 + kBlockQ), nr = r1 - r0;
          const T* Q = q + ((b * Tq + r0) * H + h) * dk;
          const T* Gr = G + r0 * w;
          kernel::gemm(false, true, nr, nk, dk, scale, Q, H * dk, K, H * dk, T(0), P, nk);
          vis.mask_block(P, b, r0, nr, k0, nk, S);
          recompute_probabilities(P, nr, nk, L + r0);
          const T* Vp = packed + k0 * w;
          // dc += P^T dmu; du += exp(u - cap) * (P^T [dL exp(cap - L)]): one product for both halves.
          kernel::gemm(true, false, nk, w, nr, T(1), P, nk, Gr, w, T(0), tmp, w);
          for (int64_t j = 0; j < nk; ++j) {
            T* d = dCU + j * w;
            const T* t = tmp + j * w;
            const T* e = Vp + j * w + dv;
            for (int64_t ch = 0; ch < dv; ++ch) d[ch] += t[ch];
            for (int64_t ch = 0; ch < dv; ++ch) d[dv + ch] += e[ch] * t[dv + ch];
          }
          // dP_ti = dmu_t . c_i + sum_j G_tj exp(u_ij - cap); dS = P (dP - Delta).
          kernel::gemm(false, true, nr, nk, w, T(1), Gr, w, Vp, w, T(0), dP, nk);
          softmax_backward_block(dP, P, nr, nk, delta + r0);
          kernel::gemm(false, false, nr, dk, nk, scale, dP, nk, K, H * dk, T(1), dq + ((b * Tq + r0) * H + h) * dk, H * dk);
          kernel::gemm(true, false, nk, dk, nr, scale, dP, nk, Q, H * dk, T(1), dK, dk);
        }
        for (int64_t j = 0; j < nk; ++j) {
          const int64_t row = (b * S + k0 + j) * H + h;
          std::copy(dK + j * dk, dK + (j + 1) * dk, dk_out + row * dk);
          std::copy(dCU + j * w, dCU + j * w + dv, dc_out + row * dv);
          std::copy(dCU + j * w + dv, dCU + (j + 1) * w, du_out + row * dv);
        }
      }
    }
  });
}

void check_read_args(const at::Tensor& v, const at::Tensor& beta, double cap) {
  check_kernel_inputs("fem_softmax_read_fused", {beta});
  TORCH_CHECK(beta.scalar_type() == v.scalar_type(), "fem_softmax_read_fused: beta must be ", v.scalar_type(),
              " like v (got ", beta.scalar_type(), ")");
  TORCH_CHECK(beta.numel() == v.size(2) * v.size(3), "fem_softmax_read_fused: beta must have H*dv = ",
              v.size(2) * v.size(3), " entries (got ", beta.numel(), ")");
  check_positive("fem_softmax_read_fused", "beta", beta);
  TORCH_CHECK(cap > 0, "fem_softmax_read_fused: needs a value cap > 0 (got ", cap, ")");
  TORCH_CHECK(cap <= kMaxConstantShiftCap, "fem_softmax_read_fused: cap must be <= ", kMaxConstantShiftCap,
              " (got ", cap, ")");
  TORCH_CHECK(v.scalar_type() != at::kFloat || cap <= kFemShiftSpan, "fem_softmax_read_fused: float32 needs cap <= ",
              kFemShiftSpan, " (got ", cap, ")");
}

}  // namespace

std::vector<at::Tensor> fem_softmax_read_fused_forward(const FemSoftmaxForwardCall& call) {
  const at::Tensor &q_in = call.q, &k_in = call.k, &v_in = call.v, &beta_in = call.beta;
  const at::Tensor key_mask = call.key_mask.value_or(at::Tensor());
  check_flash_args("fem_softmax_read_fused", q_in, k_in, v_in, key_mask, call.scale);
  check_read_args(v_in, beta_in, call.cap);
  auto q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous(), beta = beta_in.contiguous();
  const auto mask = key_mask.defined() ? key_mask.contiguous() : at::Tensor();
  const int64_t B = q.size(0), T = q.size(1), S = k.size(1), H = q.size(2), dk = q.size(3), dv = v.size(3);
  auto mean = at::empty({B, T, H, dv}, q.options()), free_energy = at::empty({B, T, H, dv}, q.options());
  auto lse = at::empty({B, H, T}, q.options());
  auto c = at::empty_like(v), u = at::empty_like(v);
  auto block_packs = at::empty({B, H, S, 2 * dv}, v.options());
  auto block_shift = at::empty({B, H, (S + kBlockK - 1) / kBlockK, dv}, v.options());
  const Visibility vis(call.causal, T, S, B, mask.defined() ? mask.data_ptr<bool>() : nullptr);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fem_softmax_read_fused_forward", [&] {
    const scalar_t* bp = beta.data_ptr<scalar_t>();
    clip_and_scale<scalar_t>(v.data_ptr<scalar_t>(), bp, c.data_ptr<scalar_t>(), u.data_ptr<scalar_t>(), B * S * H, H,
                             dv, static_cast<scalar_t>(call.cap));
    const auto shift_floor = static_cast<scalar_t>(call.cap - kFemShiftSpan);
    pack_key_blocks<scalar_t>(c.data_ptr<scalar_t>(), u.data_ptr<scalar_t>(), block_packs.data_ptr<scalar_t>(),
                              block_shift.data_ptr<scalar_t>(), B, S, H, dv, shift_floor);
    forward_kernel<scalar_t>(q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), c.data_ptr<scalar_t>(),
                             u.data_ptr<scalar_t>(), block_packs.data_ptr<scalar_t>(), block_shift.data_ptr<scalar_t>(),
                             mean.data_ptr<scalar_t>(), free_energy.data_ptr<scalar_t>(), lse.data_ptr<scalar_t>(),
                             B, T, S, H, dk, dv, static_cast<scalar_t>(call.scale), shift_floor, vis);
    // F = L / beta, in place.
    scalar_t* f = free_energy.data_ptr<scalar_t>();
    at::parallel_for(0, B * T * H, 256, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row)
        for (int64_t ch = 0; ch < dv; ++ch) f[row * dv + ch] /= bp[(row % H) * dv + ch];
    });
  });
  return {mean, free_energy, lse};
}

std::vector<at::Tensor> fem_softmax_read_fused_backward(const FemSoftmaxBackwardCall& call) {
  const at::Tensor &d_mean_in = call.d_mean, &d_free_in = call.d_free, &beta_in = call.beta;
  const at::Tensor key_mask = call.key_mask.value_or(at::Tensor());
  auto q = call.q.contiguous(), k = call.k.contiguous(), v = call.v.contiguous(), beta = beta_in.contiguous();
  auto mean = call.mean.contiguous(), free = call.free_energy.contiguous(), lse = call.lse.contiguous();
  auto d_mean = d_mean_in.defined() ? d_mean_in.contiguous() : at::zeros_like(mean);
  auto d_free = d_free_in.defined() ? d_free_in.contiguous() : at::zeros_like(free);
  const auto mask = key_mask.defined() ? key_mask.contiguous() : at::Tensor();
  const int64_t B = q.size(0), T = q.size(1), S = k.size(1), H = q.size(2), dk = q.size(3), dv = v.size(3);
  auto dq = at::zeros_like(q), dk_t = at::empty_like(k), dc = at::empty_like(v), du = at::empty_like(v);  // key rows all written
  auto c = at::empty_like(v), u = at::empty_like(v), d_v = at::empty_like(v), dbeta_terms = at::empty_like(v);
  auto log_read = at::empty_like(free), d_log = at::empty_like(free), dbeta_direct = at::empty_like(free);
  const Visibility vis(call.causal, T, S, B, mask.defined() ? mask.data_ptr<bool>() : nullptr);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fem_softmax_read_fused_backward", [&] {
    const scalar_t* bp = beta.data_ptr<scalar_t>();
    const scalar_t cap_t = static_cast<scalar_t>(call.cap);
    clip_and_scale<scalar_t>(v.data_ptr<scalar_t>(), bp, c.data_ptr<scalar_t>(), u.data_ptr<scalar_t>(), B * S * H, H,
                             dv, cap_t);
    // L = beta F, dL = dF / beta, and F = L / beta's own beta term -dF F / beta per element.
    const scalar_t *f = free.data_ptr<scalar_t>(), *df = d_free.data_ptr<scalar_t>();
    scalar_t *lr = log_read.data_ptr<scalar_t>(), *dl = d_log.data_ptr<scalar_t>(), *dbd = dbeta_direct.data_ptr<scalar_t>();
    at::parallel_for(0, B * T * H, 256, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row)
        for (int64_t ch = 0; ch < dv; ++ch) {
          const int64_t i = row * dv + ch;
          const scalar_t b = bp[(row % H) * dv + ch];
          lr[i] = b * f[i];
          dl[i] = df[i] / b;
          dbd[i] = -df[i] * f[i] / b;
        }
    });
    backward_kernel<scalar_t>(q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), c.data_ptr<scalar_t>(),
                              u.data_ptr<scalar_t>(), mean.data_ptr<scalar_t>(), lr, lse.data_ptr<scalar_t>(),
                              d_mean.data_ptr<scalar_t>(), dl, dq.data_ptr<scalar_t>(), dk_t.data_ptr<scalar_t>(),
                              dc.data_ptr<scalar_t>(), du.data_ptr<scalar_t>(), B, T, S, H, dk, dv,
                              static_cast<scalar_t>(call.scale), cap_t, vis);
    clip_and_scale_backward<scalar_t>(v.data_ptr<scalar_t>(), bp, c.data_ptr<scalar_t>(), dc.data_ptr<scalar_t>(),
                                      du.data_ptr<scalar_t>(), d_v.data_ptr<scalar_t>(),
                                      dbeta_terms.data_ptr<scalar_t>(), B * S * H, H, dv, cap_t);
  });
  const std::vector<int64_t> batch_and_time{0, 1};
  auto dbeta = dbeta_terms.sum(batch_and_time) + dbeta_direct.sum(batch_and_time);  // [H,dv]
  return {dq, dk_t, d_v, dbeta.reshape(beta_in.sizes())};
}

}  // namespace seqmix::ops
