// The fused GLA scan with a decay per key feature, log_decay [B,T,H,dk] (the GLA paper's gates): a recurrent
// scan per (batch, head) over the state [S, z] [dk, dv+1], each step one row-wise decay, one rank-1 update and
// one [dk] x [dk, dv+1] read, every factor e^{a} <= 1. The forward saves the state entering each chunk of
// kChunk positions; the backward rebuilds one chunk's states from it and walks the chunk in reverse with the
// exact per-step gradients (no cumulative-sum cancellation in the decay gradient). Derivation in README.md.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "../common/kernel_utils.h"
#include "fused_kernels.h"

namespace seqmix::ops::gla_kernel {
namespace {

using Dims = ScanDims;

// One step of the recurrence on the state [dk, dv+1]: row d becomes e^{a_d} row_d + k_d [v, 1].
template <typename T>
void advance(T* state, const T* k, const T* v, const T* a, int64_t dk, int64_t dv) {
  const int64_t w = dv + 1;
  for (int64_t d = 0; d < dk; ++d) {
    T* row = state + d * w;
    const T decay = kernel::fast_exp(a[d]), key = k[d];
    for (int64_t j = 0; j < dv; ++j) row[j] = decay * row[j] + key * v[j];
    row[dv] = decay * row[dv] + key;
  }
}

// q, k, log_decay [B,T,H,dk], v [B,T,H,dv] (each sequence from a zero state) -> numerator [B,T,H,dv],
// normaliser [B,T,H] and the state entering every chunk, states [B,H,capacity,dk,dv+1].
template <typename T>
void forward_kernel(const T* q, const T* k, const T* v, const T* log_decay, T* numerator, T* normaliser, T* states,
                    const Dims& d) {
  const int64_t H = d.H, dk = d.dk, dv = d.dv, w = d.width(), chunks = static_cast<int64_t>(d.chunks.size());
  at::parallel_for(0, d.B * H, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> state(dk * w), out(w);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / H, h = task % H;
      for (int64_t chunk = 0; chunk < chunks; ++chunk) {
        const Chunk& span = d.chunks[static_cast<size_t>(chunk)];
        if (span.first_of_sequence) std::fill(state.begin(), state.end(), T(0));
        std::copy(state.begin(), state.end(), states + (task * d.capacity + chunk) * dk * w);
        for (int64_t t = span.begin; t < span.end; ++t) {
          const int64_t row = (b * d.T + t) * H + h;  // (b, t, h)
          advance(state.data(), k + row * dk, v + row * dv, log_decay + row * dk, dk, dv);
          std::fill(out.begin(), out.end(), T(0));
          const T* query = q + row * dk;
          for (int64_t f = 0; f < dk; ++f) {
            const T* s = state.data() + f * w;
            for (int64_t j = 0; j < w; ++j) out[j] += query[f] * s[j];
          }
          std::copy(out.begin(), out.begin() + dv, numerator + row * dv);
          normaliser[row] = out[dv];
        }
      }
    }
  });
}

// Gradients w.r.t. q, k, v, log_decay from those w.r.t. the numerator [B,T,H,dv] and normaliser [B,T,H].
// With S_t the state after t, G'_t = [g_num_t, g_den_t], v'_t = [v_t, 1] and dS the gradient w.r.t. S_t
// (carried backwards: dS_{t-1} = diag(e^{a_t}) dS_t, plus q_{t-1} (x) G'_{t-1} from its own read):
//   dq_t = S_t G'_t,  dk_t = dS_t v'_t,  dv_t = (dS_t^T k_t)[:dv],  d a_t = e^{a_t} ⊙ rowsum(dS_t ⊙ S_{t-1}).
template <typename T>
void backward_kernel(const T* q, const T* k, const T* v, const T* log_decay, const T* states, const T* grad_numerator,
                     const T* grad_normaliser, T* dq, T* dk_out, T* dv_out, T* dlog_decay, const Dims& d) {
  const int64_t H = d.H, dk = d.dk, dv = d.dv, w = d.width(), chunks = static_cast<int64_t>(d.chunks.size());
  at::parallel_for(0, d.B * H, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> trajectory((kChunk + 1) * dk * w), dstate(dk * w), grad(w), value(w);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / H, h = task % H;
      std::fill(dstate.begin(), dstate.end(), T(0));
      for (int64_t chunk = chunks - 1; chunk >= 0; --chunk) {
        const Chunk& span = d.chunks[static_cast<size_t>(chunk)];
        const int64_t t0 = span.begin, n = span.end - span.begin;
        // trajectory[i] = the state before position t0 + i (i = 0: the saved entry state), i = 0..n.
        const T* entry = states + (task * d.capacity + chunk) * dk * w;
        std::copy(entry, entry + dk * w, trajectory.begin());
        for (int64_t i = 0; i < n; ++i) {
          const int64_t row = (b * d.T + t0 + i) * H + h;
          T* next = trajectory.data() + (i + 1) * dk * w;
          std::copy(next - dk * w, next, next);
          advance(next, k + row * dk, v + row * dv, log_decay + row * dk, dk, dv);
        }
        for (int64_t i = n - 1; i >= 0; --i) {
          const int64_t row = (b * d.T + t0 + i) * H + h;
          const T *query = q + row * dk, *key = k + row * dk, *a = log_decay + row * dk;
          std::copy(grad_numerator + row * dv, grad_numerator + (row + 1) * dv, grad.begin());
          grad[dv] = grad_normaliser[row];
          std::copy(v + row * dv, v + (row + 1) * dv, value.begin());
          value[dv] = T(1);
          const T* after = trajectory.data() + (i + 1) * dk * w;
          const T* before = trajectory.data() + i * dk * w;
          T* dV = dv_out + row * dv;
          std::fill(dV, dV + dv, T(0));
          for (int64_t f = 0; f < dk; ++f) {
            T* ds = dstate.data() + f * w;
            dq[row * dk + f] = kernel::dot(after + f * w, grad.data(), w);
            for (int64_t j = 0; j < w; ++j) ds[j] += query[f] * grad[j];  // now the gradient w.r.t. S_t
            dk_out[row * dk + f] = kernel::dot(ds, value.data(), w);
            for (int64_t j = 0; j < dv; ++j) dV[j] += ds[j] * key[f];
            const T decay = kernel::fast_exp(a[f]);
            dlog_decay[row * dk + f] = decay * kernel::dot(ds, before + f * w, w);
            for (int64_t j = 0; j < w; ++j) ds[j] *= decay;  // to the gradient w.r.t. S_{t-1}
          }
        }
        // A sequence's first state is zero, not the sequence before's: no gradient flows back past it.
        if (span.first_of_sequence) std::fill(dstate.begin(), dstate.end(), T(0));
      }
    }
  });
}

}  // namespace

void per_key_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_decay,
                     const at::Tensor& numerator, const at::Tensor& normaliser, const at::Tensor& states,
                     const ScanDims& d) {
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "gla_per_key_forward", [&] {
    forward_kernel<scalar_t>(q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                             log_decay.data_ptr<scalar_t>(), numerator.data_ptr<scalar_t>(),
                             normaliser.data_ptr<scalar_t>(), states.data_ptr<scalar_t>(), d);
  });
}

void per_key_backward(const at::Tensor& grad_numerator, const at::Tensor& grad_normaliser, const at::Tensor& q,
                      const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_decay, const at::Tensor& states,
                      const at::Tensor& dq, const at::Tensor& dk, const at::Tensor& dv, const at::Tensor& dlog_decay,
                      const ScanDims& d) {
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "gla_per_key_backward", [&] {
    backward_kernel<scalar_t>(q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                              log_decay.data_ptr<scalar_t>(), states.data_ptr<scalar_t>(),
                              grad_numerator.data_ptr<scalar_t>(), grad_normaliser.data_ptr<scalar_t>(),
                              dq.data_ptr<scalar_t>(), dk.data_ptr<scalar_t>(), dv.data_ptr<scalar_t>(),
                              dlog_decay.data_ptr<scalar_t>(), d);
  });
}

}  // namespace seqmix::ops::gla_kernel
