// Chunked gated linear attention on the CPU: chunks of kChunk positions in log space, the intra-chunk
// part by block products with the exp(c_t - c_i) mask, the inter-chunk part through a carried state.
// The normaliser rides along as an extra value column of ones (values [v, 1], state [S, z]), so one
// set of block products serves both reads. The forward saves the state entering each chunk; the
// backward walks the chunks in reverse, carrying the gradient of the state leaving the chunk.
// Parallel over (batch, head); the block products go to kernel::gemm. Derivation in README.md.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "../common/checks.h"
#include "../common/kernel_utils.h"
#include "../common/packing.h"
#include "fused_kernels.h"
#include "seqmix/ops/gla.h"

namespace seqmix::ops {
namespace {

using gla_kernel::kChunk;
using Dims = gla_kernel::ScanDims;

// Decay factors of one chunk of n positions from its log decays (stride H apart), all exponents <= 0:
//   c_t = a_0 + ... + a_t (local log cumsum), decay_in[t] = e^{c_t} (from the chunk's entry state to t),
//   decay_out[i] = e^{c_last - c_i} (from i to the chunk's exit state),
//   mask[t,i] = e^{c_t - c_i} for i <= t, else 0   [n,n].
template <typename T>
void chunk_decay(const T* log_decay, int64_t stride, int64_t n, T* c, T* decay_in, T* decay_out, T* mask) {
  T sum = 0;
  for (int64_t t = 0; t < n; ++t) {
    sum += log_decay[t * stride];
    c[t] = sum;
  }
  for (int64_t t = 0; t < n; ++t) {
    decay_in[t] = kernel::fast_exp(c[t]);
    decay_out[t] = kernel::fast_exp(c[n - 1] - c[t]);
  }
  for (int64_t t = 0; t < n; ++t) {
    T* row = mask + t * n;
    for (int64_t i = 0; i <= t; ++i) row[i] = kernel::fast_exp(c[t] - c[i]);
    std::fill(row + t + 1, row + n, T(0));
  }
}

// out[r, :cols] = scale[r] * in[r, :cols] for n rows (in with leading dimension ld_in, out packed).
template <typename T>
void scale_rows(const T* in, int64_t ld_in, int64_t n, int64_t cols, const T* scale, T* out) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < cols; ++j) out[r * cols + j] = scale[r] * in[r * ld_in + j];
}

// Packs n rows of width dv (leading dimension ld) and a last column `last` (stride last_stride, or the
// constant 1 when null) into [n, dv+1].
template <typename T>
void pack_augmented(const T* rows, int64_t ld, const T* last, int64_t last_stride, int64_t n, int64_t dv, T* out) {
  const int64_t width = dv + 1;
  for (int64_t r = 0; r < n; ++r) {
    std::copy(rows + r * ld, rows + r * ld + dv, out + r * width);
    out[r * width + dv] = last ? last[r * last_stride] : T(1);
  }
}

template <typename T>
void multiply(T* x, const T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= y[i];
}

template <typename T>
void add(T* x, const T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

// Per-thread buffers of one (b,h) task.
template <typename T>
struct Workspace {
  std::vector<T> c, decay_in, decay_out, mask, scores, dscores, pair_grads, values, grads, scaled_q, scaled_k,
      scaled_v, scaled_g, through_state, out, state, dstate, decay_grad, column_sums;
  explicit Workspace(const Dims& d) {
    const size_t n = kChunk, w = static_cast<size_t>(d.width()), dk = static_cast<size_t>(d.dk);
    for (auto* v : {&c, &decay_in, &decay_out, &decay_grad, &column_sums}) v->resize(n);
    for (auto* v : {&mask, &scores, &dscores, &pair_grads}) v->resize(n * n);
    for (auto* v : {&values, &grads, &scaled_v, &scaled_g, &out}) v->resize(n * w);
    for (auto* v : {&scaled_q, &scaled_k, &through_state}) v->resize(n * dk);
    for (auto* v : {&state, &dstate}) v->resize(dk * w);
  }
};

// q, k [B,T,H,dk], v [B,T,H,dv], log_decay [B,T,H] -> numerator [B,T,H,dv], normaliser [B,T,H] and the
// augmented state [S, z] entering every chunk, states [B,H,chunks,dk,dv+1].
template <typename T>
void forward_kernel(const T* q, const T* k, const T* v, const T* log_decay, T* numerator, T* normaliser, T* states,
                    const Dims& d) {
  const int64_t H = d.H, dk = d.dk, dv = d.dv, w = d.width(), chunks = static_cast<int64_t>(d.chunks.size());
  const int64_t ld_qk = H * dk, ld_v = H * dv;
  at::parallel_for(0, d.B * H, 1, [&](int64_t begin, int64_t end) {
    Workspace<T> ws(d);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / H, h = task % H;
      T* state = ws.state.data();  // [dk, dv+1]: [S, z] entering the chunk
      for (int64_t chunk = 0; chunk < chunks; ++chunk) {
        const Chunk& span = d.chunks[static_cast<size_t>(chunk)];
        if (span.first_of_sequence) std::fill(state, state + dk * w, T(0));
        const int64_t t0 = span.begin, n = span.end - span.begin;
        const int64_t row = (b * d.T + t0) * H + h;  // (b, t0, h)
        const T* Q = q + row * dk;
        const T* K = k + row * dk;
        chunk_decay(log_decay + row, H, n, ws.c.data(), ws.decay_in.data(), ws.decay_out.data(), ws.mask.data());
        T* values = ws.values.data();  // [n, dv+1] = [v, 1]
        pack_augmented<T>(v + row * dv, ld_v, nullptr, 0, n, dv, values);
        std::copy(state, state + dk * w, states + (task * d.capacity + chunk) * dk * w);

        // Intra-chunk: scores = (Q K^T) ⊙ mask [n,n]; out = scores [v,1] + diag(e^c) Q [S,z]  [n, dv+1].
        T* scores = ws.scores.data();
        kernel::gemm(false, true, n, n, dk, T(1), Q, ld_qk, K, ld_qk, T(0), scores, n);
        multiply(scores, ws.mask.data(), n * n);
        T* out = ws.out.data();
        kernel::gemm(false, false, n, w, n, T(1), scores, n, values, w, T(0), out, w);
        scale_rows(Q, ld_qk, n, dk, ws.decay_in.data(), ws.scaled_q.data());
        kernel::gemm(false, false, n, w, dk, T(1), ws.scaled_q.data(), dk, state, w, T(1), out, w);
        for (int64_t t = 0; t < n; ++t) {
          std::copy(out + t * w, out + t * w + dv, numerator + (row + t * H) * dv);
          normaliser[row + t * H] = out[t * w + dv];
        }

        // Exit state: e^{c_last} [S, z] + (diag(e^{c_last - c}) K)^T [v, 1].
        scale_rows(K, ld_qk, n, dk, ws.decay_out.data(), ws.scaled_k.data());
        kernel::gemm(true, false, dk, w, n, T(1), ws.scaled_k.data(), dk, values, w, ws.decay_in[n - 1], state, w);
      }
    }
  });
}

// Gradients w.r.t. q, k, v, log_decay from those w.r.t. the numerator [B,T,H,dv] and normaliser [B,T,H].
template <typename T>
void backward_kernel(const T* q, const T* k, const T* v, const T* log_decay, const T* states, const T* grad_numerator,
                     const T* grad_normaliser, T* dq, T* dk_out, T* dv_out, T* dlog_decay, const Dims& d) {
  const int64_t H = d.H, dk = d.dk, dv = d.dv, w = d.width(), chunks = static_cast<int64_t>(d.chunks.size());
  const int64_t ld_qk = H * dk, ld_v = H * dv;
  at::parallel_for(0, d.B * H, 1, [&](int64_t begin, int64_t end) {
    Workspace<T> ws(d);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / H, h = task % H;
      T* dstate = ws.dstate.data();  // [dk, dv+1]: gradient w.r.t. [S, z] leaving the chunk
      std::fill(dstate, dstate + dk * w, T(0));
      for (int64_t chunk = chunks - 1; chunk >= 0; --chunk) {
        const Chunk& span = d.chunks[static_cast<size_t>(chunk)];
        const int64_t t0 = span.begin, n = span.end - span.begin;
        const int64_t row = (b * d.T + t0) * H + h;
        const T* Q = q + row * dk;
        const T* K = k + row * dk;
        T* dQ = dq + row * dk;
        T* dK = dk_out + row * dk;
        T* dV = dv_out + row * dv;
        const T* state = states + (task * d.capacity + chunk) * dk * w;  // [S, z] entering the chunk
        const T* decay_in = ws.decay_in.data();
        const T* decay_out = ws.decay_out.data();
        const T* mask = ws.mask.data();
        chunk_decay(log_decay + row, H, n, ws.c.data(), ws.decay_in.data(), ws.decay_out.data(), ws.mask.data());
        T* values = ws.values.data();  // [n, dv+1] = [v, 1]
        T* grads = ws.grads.data();    // [n, dv+1] = [grad numerator, grad normaliser]
        pack_augmented<T>(v + row * dv, ld_v, nullptr, 0, n, dv, values);
        pack_augmented<T>(grad_numerator + row * dv, ld_v, grad_normaliser + row, H, n, dv, grads);

        // scores = (Q K^T) ⊙ mask; dscores = (grads [v,1]^T) ⊙ mask, the gradient w.r.t. Q K^T;
        // pair_grads = (grads [v,1]^T) ⊙ scores, the gradient w.r.t. each pair's log weight c_t - c_i.
        T* scores = ws.scores.data();
        T* dscores = ws.dscores.data();
        T* pair_grads = ws.pair_grads.data();
        kernel::gemm(false, true, n, n, dk, T(1), Q, ld_qk, K, ld_qk, T(0), scores, n);
        multiply(scores, mask, n * n);
        kernel::gemm(false, true, n, n, w, T(1), grads, w, values, w, T(0), dscores, n);
        for (int64_t j = 0; j < n * n; ++j) pair_grads[j] = dscores[j] * scores[j];
        multiply(dscores, mask, n * n);

        // dq = dscores K + diag(e^c) grads [S,z]^T (the second term, from the entry state, kept apart in
        // `through_state` for the decay gradient; likewise for dk).
        T* through_state = ws.through_state.data();  // [n, dk]
        T* decay_grad = ws.decay_grad.data();        // [n]
        T* scaled_g = ws.scaled_g.data();
        scale_rows(grads, w, n, w, decay_in, scaled_g);
        kernel::gemm(false, false, n, dk, n, T(1), dscores, n, K, ld_qk, T(0), dQ, ld_qk);
        kernel::gemm(false, true, n, dk, w, T(1), scaled_g, w, state, w, T(0), through_state, dk);
        // Decay (README): d a_r = sum_{i < r <= t} pair_grads[t,i] + sum_{t >= r} q_t . dq_t(entry state)
        //   + sum_{i < r} k_i . dk_i(exit state) + e^{c_last} <dstate, entry state>.
        const T through_carry = decay_in[n - 1] * kernel::dot(dstate, state, dk * w);
        T suffix = 0;
        for (int64_t t = n - 1; t >= 0; --t) {
          suffix += kernel::dot(Q + t * ld_qk, through_state + t * dk, dk);
          decay_grad[t] = suffix + through_carry;
          add(dQ + t * ld_qk, through_state + t * dk, dk);
        }
        // Pairs i < r <= t: walk r down, keeping column sums over the rows t >= r.
        T* column_sums = ws.column_sums.data();
        std::fill(column_sums, column_sums + n, T(0));
        for (int64_t r = n - 1; r > 0; --r) {
          add(column_sums, pair_grads + r * n, r);
          decay_grad[r] += kernel::row_sum(column_sums, r);
        }

        // dk = dscores^T Q + diag(e^{c_last - c}) [v,1] dstate^T.
        scale_rows(values, w, n, w, decay_out, ws.scaled_v.data());
        kernel::gemm(true, false, n, dk, n, T(1), dscores, n, Q, ld_qk, T(0), dK, ld_qk);
        kernel::gemm(false, true, n, dk, w, T(1), ws.scaled_v.data(), w, dstate, w, T(0), through_state, dk);
        T prefix = 0;
        for (int64_t t = 0; t < n; ++t) {
          decay_grad[t] += prefix;
          prefix += kernel::dot(K + t * ld_qk, through_state + t * dk, dk);
          add(dK + t * ld_qk, through_state + t * dk, dk);
          dlog_decay[row + t * H] = decay_grad[t];
        }
        // dv = scores^T grad_numerator + diag(e^{c_last - c}) K dS (the first dv columns).
        scale_rows(K, ld_qk, n, dk, decay_out, ws.scaled_k.data());
        kernel::gemm(true, false, n, dv, n, T(1), scores, n, grads, w, T(0), dV, ld_v);
        kernel::gemm(false, false, n, dv, dk, T(1), ws.scaled_k.data(), dk, dstate, w, T(1), dV, ld_v);

        // Gradient w.r.t. the entry state: e^{c_last} dstate + Q^T diag(e^c) grads; none before a sequence's
        // first chunk (its state starts from zero, not from the sequence before).
        kernel::gemm(true, false, dk, w, n, T(1), Q, ld_qk, scaled_g, w, decay_in[n - 1], dstate, w);
        if (span.first_of_sequence) std::fill(dstate, dstate + dk * w, T(0));
      }
    }
  });
}


}  // namespace

namespace gla_kernel {

ScanDims scan_dims(const at::Tensor& q, const at::Tensor& v, const at::Tensor& cu_seqlens) {
  const int64_t T = q.size(1), sequences = cu_seqlens.defined() ? cu_seqlens.numel() - 1 : 0;
  return {q.size(0), T, q.size(2), q.size(3), v.size(3), sequence_chunks(cu_seqlens, T, kChunk),
          chunk_capacity(T, sequences, kChunk)};
}

// Returns {numerator [B,T,H,dv], normaliser [B,T,H], states [B,H,capacity,dk,dv+1]}; a rank-4 log_decay runs
// the per-key scan.
std::vector<at::Tensor> gla_fused_forward(const GlaForwardCall& call) {
  const at::Tensor &q_in = call.q, &k_in = call.k, &v_in = call.v, &log_decay_in = call.log_decay;
  const at::Tensor cu_seqlens = call.cu_seqlens.value_or(at::Tensor());
  check_linear_scan_args("gla_fused", q_in, k_in, v_in, log_decay_in);
  check_kernel_inputs("gla_fused", {q_in, k_in, v_in, log_decay_in});
  check_cu_seqlens("gla_fused", cu_seqlens, q_in.size(0), q_in.size(1));
  auto q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous(), a = log_decay_in.contiguous();
  const ScanDims d = scan_dims(q, v, cu_seqlens);
  auto numerator = at::empty({d.B, d.T, d.H, d.dv}, q.options());
  auto normaliser = at::empty({d.B, d.T, d.H}, q.options());
  // Packed, the capacity may exceed the chunks; the unused entries stay zero.
  auto states = at::zeros({d.B, d.H, d.capacity, d.dk, d.width()}, q.options());
  if (a.dim() == 4) {
    per_key_forward(q, k, v, a, numerator, normaliser, states, d);
  } else {
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "gla_fused_forward", [&] {
      forward_kernel<scalar_t>(q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                               a.data_ptr<scalar_t>(), numerator.data_ptr<scalar_t>(), normaliser.data_ptr<scalar_t>(),
                               states.data_ptr<scalar_t>(), d);
    });
  }
  return {numerator, normaliser, states};
}

// Returns {dq, dk, dv, dlog_decay}; an undefined upstream gradient counts as zeros.
std::vector<at::Tensor> gla_fused_backward(const GlaBackwardCall& call) {
  const at::Tensor &q_in = call.q, &k_in = call.k, &v_in = call.v, &log_decay_in = call.log_decay;
  const at::Tensor &grad_numerator = call.grad_numerator, &grad_normaliser = call.grad_normaliser;
  const at::Tensor &states_in = call.states, cu_seqlens = call.cu_seqlens.value_or(at::Tensor());
  auto q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous(), a = log_decay_in.contiguous();
  auto states = states_in.contiguous();
  const ScanDims d = scan_dims(q, v, cu_seqlens);
  auto g_num = grad_numerator.defined() ? grad_numerator.contiguous() : at::zeros({d.B, d.T, d.H, d.dv}, q.options());
  auto g_den = grad_normaliser.defined() ? grad_normaliser.contiguous() : at::zeros({d.B, d.T, d.H}, q.options());
  auto dq = at::empty_like(q), dk = at::empty_like(k), dv = at::empty_like(v), da = at::empty_like(a);
  if (a.dim() == 4) {
    per_key_backward(g_num, g_den, q, k, v, a, states, dq, dk, dv, da, d);
  } else {
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "gla_fused_backward", [&] {
      backward_kernel<scalar_t>(q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                                a.data_ptr<scalar_t>(), states.data_ptr<scalar_t>(), g_num.data_ptr<scalar_t>(),
                                g_den.data_ptr<scalar_t>(), dq.data_ptr<scalar_t>(), dk.data_ptr<scalar_t>(),
                                dv.data_ptr<scalar_t>(), da.data_ptr<scalar_t>(), d);
    });
  }
  return {dq, dk, dv, da};
}

}  // namespace gla_kernel
}  // namespace seqmix::ops
