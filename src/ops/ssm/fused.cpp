// Fused selective scan on the CPU: the recurrence per (batch, channel group) with the group's [N, G] state
// in a local buffer, states saved only every kSsmCheckpointEvery steps; the backward walks the chunks in
// reverse, recomputes a chunk's states and decays from its checkpoint, then runs the reverse scan over it.
// The state is stored [n][channel], so the inner loops run over contiguous channels and vectorise for any
// N. Reductions over channels (db, dc) and over batches (dA) go to per-task partial buffers summed at the
// end: no two tasks write the same element. Derivation in README.md.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "../common/checks.h"
#include "../common/kernel_utils.h"
#include "../common/packing.h"
#include "fused_kernels.h"
#include "seqmix/ops/ssm.h"

namespace seqmix::ops {
namespace {

constexpr int64_t kChannelGroup = 32;
constexpr int64_t kChunk = kSsmCheckpointEvery;

struct Sizes {
  int64_t B, T, C, N, groups;
  std::vector<Chunk> chunks;  // in scan order (sequence_chunks of kChunk: packed sequences restart the state)
  int64_t capacity;           // the checkpoints' chunk axis (chunk_capacity)
};
struct Group {
  int64_t batch, index, first_channel, width;
};
Group group_of(int64_t task, const Sizes& s) {
  const int64_t index = task % s.groups, c0 = index * kChannelGroup;
  return {task / s.groups, index, c0, std::min(kChannelGroup, s.C - c0)};
}

// A^T for the group's channels: out [N][kChannelGroup].
template <typename S>
void load_decay_rates(const S* A, const Group& g, const Sizes& s, S* out) {
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t j = 0; j < g.width; ++j) out[n * kChannelGroup + j] = A[(g.first_channel + j) * s.N + n];
}

// One state row n of one step in place, h = exp(delta A_n) h + (delta u) b_n, and its term of the output,
// y += c_n h. The restrict qualifiers (GCC) promise the rows do not overlap, so the loop vectorises
// without alias checks.
template <typename S>
inline void advance_row_in_place(int64_t width, S b_n, S c_n, const S* __restrict delta, const S* __restrict delta_u,
                                 const S* __restrict rate, S* __restrict h, S* __restrict y) {
  for (int64_t j = 0; j < width; ++j) {
    h[j] = kernel::fast_exp(delta[j] * rate[j]) * h[j] + delta_u[j] * b_n;
    y[j] += c_n * h[j];
  }
}

// The same step keeping the previous state and the decays a = exp(delta A_n) (the backward's recompute).
template <typename S>
inline void advance_row(int64_t width, S b_n, const S* __restrict delta, const S* __restrict delta_u,
                        const S* __restrict rate, const S* __restrict h_prev, S* __restrict h, S* __restrict a) {
  for (int64_t j = 0; j < width; ++j) {
    a[j] = kernel::fast_exp(delta[j] * rate[j]);
    h[j] = a[j] * h_prev[j] + delta_u[j] * b_n;
  }
}

// y [B,T,C]; checkpoints [B, capacity, N, C], the state entering each chunk (zero at a sequence's first).
template <typename S>
void forward_kernel(const S* u, const S* delta, const S* A, const S* b, const S* c, S* y, S* checkpoints, const Sizes& s) {
  at::parallel_for(0, s.B * s.groups, 1, [&](int64_t begin, int64_t end) {
    std::vector<S> rate_buf, h_buf;
    S delta_u[kChannelGroup], y_t[kChannelGroup];
    for (int64_t task = begin; task < end; ++task) {
      const Group g = group_of(task, s);
      S* rate = kernel::scratch(rate_buf, static_cast<size_t>(s.N * kChannelGroup));
      S* h = kernel::scratch(h_buf, static_cast<size_t>(s.N * kChannelGroup));
      load_decay_rates(A, g, s, rate);
      for (size_t chunk = 0; chunk < s.chunks.size(); ++chunk) {
        const Chunk& span = s.chunks[chunk];
        if (span.first_of_sequence) std::fill(h, h + s.N * kChannelGroup, S(0));
        S* saved = checkpoints + ((g.batch * s.capacity + static_cast<int64_t>(chunk)) * s.N) * s.C + g.first_channel;
        for (int64_t n = 0; n < s.N; ++n) std::copy(h + n * kChannelGroup, h + n * kChannelGroup + g.width, saved + n * s.C);
        for (int64_t t = span.begin; t < span.end; ++t) {
          const int64_t row = (g.batch * s.T + t) * s.C + g.first_channel;
          const S* delta_t = delta + row;
          for (int64_t j = 0; j < g.width; ++j) delta_u[j] = delta_t[j] * u[row + j];
          std::fill(y_t, y_t + g.width, S(0));
          const S* b_t = b + (g.batch * s.T + t) * s.N;
          const S* c_t = c + (g.batch * s.T + t) * s.N;
          for (int64_t n = 0; n < s.N; ++n)
            advance_row_in_place(g.width, b_t[n], c_t[n], delta_t, delta_u, rate + n * kChannelGroup,
                                 h + n * kChannelGroup, y_t);
          std::copy(y_t, y_t + g.width, y + row);
        }
      }
    }
  });
}

// The reverse step for one state row n at time t (README.md), with g_h = c_n g_y + carry (carry = a_{t+1}
// g_h_{t+1}) and q = g_h a h_{t-1}:
//   dA_n += q delta,  ddelta += A_n q,  sum_b += g_h b_n (du = delta sum_b, ddelta += u sum_b),
//   db terms g_h delta u and dc terms g_y h_t (summed over the channels by the caller), carry = a g_h.
template <typename S>
inline void reverse_row(int64_t width, S b_n, S c_n, const S* __restrict grad_y, const S* __restrict delta,
                        const S* __restrict delta_u, const S* __restrict rate, const S* __restrict a,
                        const S* __restrict h_prev, const S* __restrict h, S* __restrict carry, S* __restrict dA,
                        S* __restrict ddelta, S* __restrict sum_b, S* __restrict db_terms, S* __restrict dc_terms) {
  for (int64_t j = 0; j < width; ++j) {
    const S g_h = c_n * grad_y[j] + carry[j];
    const S q = g_h * a[j] * h_prev[j];
    dA[j] += q * delta[j];
    ddelta[j] += rate[j] * q;
    sum_b[j] += g_h * b_n;
    db_terms[j] = g_h * delta_u[j];
    dc_terms[j] = grad_y[j] * h[j];
    carry[j] = a[j] * g_h;
  }
}

// du, ddelta [B,T,C] written directly; dA_partial [B,C,N] (one slice per batch), db_partial and
// dc_partial [groups,B,T,N] (one slice per channel group).
template <typename S>
void backward_kernel(const S* grad_y, const S* u, const S* delta, const S* A, const S* b, const S* c,
                     const S* checkpoints, S* du, S* ddelta, S* dA_partial, S* db_partial, S* dc_partial, const Sizes& s) {
  const int64_t stride = s.N * kChannelGroup;  // one [N][G] state
  at::parallel_for(0, s.B * s.groups, 1, [&](int64_t begin, int64_t end) {
    std::vector<S> rate_buf, carry_buf, dA_buf, h_buf, a_buf;
    S delta_u[kChannelGroup], grad_y_t[kChannelGroup], sum_b[kChannelGroup], ddelta_t[kChannelGroup];
    S db_terms[kChannelGroup], dc_terms[kChannelGroup];
    for (int64_t task = begin; task < end; ++task) {
      const Group g = group_of(task, s);
      S* rate = kernel::scratch(rate_buf, static_cast<size_t>(stride));
      S* carry = kernel::scratch(carry_buf, static_cast<size_t>(stride));
      S* dA = kernel::scratch(dA_buf, static_cast<size_t>(stride));
      S* hs = kernel::scratch(h_buf, static_cast<size_t>((kChunk + 1) * stride));  // h_{t0-1} .. h_{t1-1}
      S* as = kernel::scratch(a_buf, static_cast<size_t>(kChunk * stride));        // a_{t0} .. a_{t1-1}
      load_decay_rates(A, g, s, rate);
      std::fill(carry, carry + stride, S(0));
      std::fill(dA, dA + stride, S(0));
      for (int64_t chunk = static_cast<int64_t>(s.chunks.size()) - 1; chunk >= 0; --chunk) {
        const Chunk& span = s.chunks[static_cast<size_t>(chunk)];
        const int64_t t0 = span.begin, t1 = span.end;
        // Recompute the chunk's states from its checkpoint.
        const S* saved = checkpoints + ((g.batch * s.capacity + chunk) * s.N) * s.C + g.first_channel;
        for (int64_t n = 0; n < s.N; ++n) std::copy(saved + n * s.C, saved + n * s.C + g.width, hs + n * kChannelGroup);
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t row = (g.batch * s.T + t) * s.C + g.first_channel;
          for (int64_t j = 0; j < g.width; ++j) delta_u[j] = delta[row + j] * u[row + j];
          const S* b_t = b + (g.batch * s.T + t) * s.N;
          const S* h_prev = hs + (t - t0) * stride;
          S* h = hs + (t - t0 + 1) * stride;
          S* a = as + (t - t0) * stride;
          for (int64_t n = 0; n < s.N; ++n)
            advance_row(g.width, b_t[n], delta + row, delta_u, rate + n * kChannelGroup, h_prev + n * kChannelGroup,
                        h + n * kChannelGroup, a + n * kChannelGroup);
        }
        // The reverse scan over the chunk.
        for (int64_t t = t1 - 1; t >= t0; --t) {
          const int64_t row = (g.batch * s.T + t) * s.C + g.first_channel;
          const S* delta_t = delta + row;
          const S* u_t = u + row;
          for (int64_t j = 0; j < g.width; ++j) delta_u[j] = delta_t[j] * u_t[j];
          std::copy(grad_y + row, grad_y + row + g.width, grad_y_t);
          std::fill(sum_b, sum_b + g.width, S(0));
          std::fill(ddelta_t, ddelta_t + g.width, S(0));
          const S* b_t = b + (g.batch * s.T + t) * s.N;
          const S* c_t = c + (g.batch * s.T + t) * s.N;
          const int64_t reduced = ((g.index * s.B + g.batch) * s.T + t) * s.N;
          const S* h_prev = hs + (t - t0) * stride;
          const S* h = hs + (t - t0 + 1) * stride;
          const S* a = as + (t - t0) * stride;
          for (int64_t n = 0; n < s.N; ++n) {
            const int64_t o = n * kChannelGroup;
            reverse_row(g.width, b_t[n], c_t[n], grad_y_t, delta_t, delta_u, rate + o, a + o, h_prev + o, h + o,
                        carry + o, dA + o, ddelta_t, sum_b, db_terms, dc_terms);
            db_partial[reduced + n] = kernel::row_sum(db_terms, g.width);
            dc_partial[reduced + n] = kernel::row_sum(dc_terms, g.width);
          }
          for (int64_t j = 0; j < g.width; ++j) {
            du[row + j] = delta_t[j] * sum_b[j];
            ddelta[row + j] = ddelta_t[j] + u_t[j] * sum_b[j];
          }
        }
        // A sequence's first state is zero, not the sequence before's: no gradient flows back past it.
        if (span.first_of_sequence) std::fill(carry, carry + stride, S(0));
      }
      for (int64_t j = 0; j < g.width; ++j)
        for (int64_t n = 0; n < s.N; ++n)
          dA_partial[(g.batch * s.C + g.first_channel + j) * s.N + n] = dA[n * kChannelGroup + j];
    }
  });
}


Sizes sizes_of(const at::Tensor& u, const at::Tensor& A, const at::Tensor& cu_seqlens) {
  const int64_t B = u.size(0), T = u.size(1), C = u.size(2), N = A.size(1);
  const int64_t sequences = cu_seqlens.defined() ? cu_seqlens.numel() - 1 : 0;
  return {B, T, C, N, (C + kChannelGroup - 1) / kChannelGroup, sequence_chunks(cu_seqlens, T, kChunk),
          chunk_capacity(T, sequences, kChunk)};
}

}  // namespace

SsmFusedForward ssm_scan_fused_forward(const at::Tensor& u_in, const at::Tensor& delta_in, const at::Tensor& A_in,
                                       const at::Tensor& b_in, const at::Tensor& c_in, const at::Tensor& cu_seqlens) {
  check_ssm_args("ssm_scan_fused", u_in, delta_in, A_in, b_in, c_in);
  check_kernel_inputs("ssm_scan_fused", {u_in, delta_in, A_in, b_in, c_in});
  check_cu_seqlens("ssm_scan_fused", cu_seqlens, u_in.size(0), u_in.size(1));
  auto u = u_in.contiguous(), delta = delta_in.contiguous(), A = A_in.contiguous();
  auto b = b_in.contiguous(), c = c_in.contiguous();
  const Sizes s = sizes_of(u, A, cu_seqlens);
  auto y = at::empty_like(u);
  auto checkpoints = at::zeros({s.B, s.capacity, s.N, s.C}, u.options());  // packed: unused slots stay zero
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "ssm_scan_fused_forward", [&] {
    forward_kernel<scalar_t>(u.data_ptr<scalar_t>(), delta.data_ptr<scalar_t>(), A.data_ptr<scalar_t>(),
                             b.data_ptr<scalar_t>(), c.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(),
                             checkpoints.data_ptr<scalar_t>(), s);
  });
  return {y, checkpoints};
}

std::vector<at::Tensor> ssm_scan_fused_backward(const SsmScanBackwardCall& call) {
  const at::Tensor &grad_y_in = call.grad_y, &u_in = call.u, &delta_in = call.delta, &A_in = call.A, &b_in = call.b;
  const at::Tensor &c_in = call.c, &checkpoints_in = call.checkpoints;
  const at::Tensor cu_seqlens = call.cu_seqlens.value_or(at::Tensor());
  const char* op = "ssm_scan_fused backward";
  check_ssm_args(op, u_in, delta_in, A_in, b_in, c_in);
  check_kernel_inputs(op, {u_in, delta_in, A_in, b_in, c_in});
  const Sizes s = sizes_of(u_in, A_in, cu_seqlens);
  TORCH_CHECK(grad_y_in.sizes() == u_in.sizes() && grad_y_in.scalar_type() == u_in.scalar_type(), op,
              ": the gradient of y must match u (", u_in.sizes(), ", ", u_in.scalar_type(), ")");
  TORCH_CHECK(checkpoints_in.sizes() == at::IntArrayRef({s.B, s.capacity, s.N, s.C}), op,
              ": checkpoints must have shape [B, ceil(T/64) + packed sequences, N, C] (got ", checkpoints_in.sizes(), ")");
  auto grad_y = grad_y_in.contiguous(), u = u_in.contiguous(), delta = delta_in.contiguous(), A = A_in.contiguous();
  auto b = b_in.contiguous(), c = c_in.contiguous(), checkpoints = checkpoints_in.contiguous();
  auto du = at::empty_like(u), ddelta = at::empty_like(delta);
  auto dA_partial = at::empty({s.B, s.C, s.N}, u.options());
  auto db_partial = at::empty({s.groups, s.B, s.T, s.N}, u.options());
  auto dc_partial = at::empty({s.groups, s.B, s.T, s.N}, u.options());
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "ssm_scan_fused_backward", [&] {
    backward_kernel<scalar_t>(grad_y.data_ptr<scalar_t>(), u.data_ptr<scalar_t>(), delta.data_ptr<scalar_t>(),
                              A.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(), c.data_ptr<scalar_t>(),
                              checkpoints.data_ptr<scalar_t>(), du.data_ptr<scalar_t>(), ddelta.data_ptr<scalar_t>(),
                              dA_partial.data_ptr<scalar_t>(), db_partial.data_ptr<scalar_t>(),
                              dc_partial.data_ptr<scalar_t>(), s);
  });
  return {du, ddelta, dA_partial.sum(0), db_partial.sum(0), dc_partial.sum(0)};
}

}  // namespace seqmix::ops
