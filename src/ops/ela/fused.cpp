// The causal Hadamard Exp scan on the CPU, one task per (batch, head). The state is kept relative to the
// causal running max r_t of each key channel, and each query is shifted by its own max c_t:
//   P_td = sum_{j<=t} exp(k_jd - r_td) v_j,   z_td = sum_{j<=t} exp(k_jd - r_td),
//   phi_td = exp(q_td + r_td - c_t),  c_t = max_d (q_td + r_td),
//   y_t = sum_d phi_td P_td / sum_d phi_td z_td.
// Every exponent is <= 0 and no future key enters a shift, so the scan is exact and exactly causal.
// The backward treats the shifts as constants (y does not depend on them) and runs two passes: a forward
// rescan for dq, and a reverse scan for dk and dv whose accumulators are relative to r_t as well.
// Derivation in README.md.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "../common/checks.h"
#include "../common/kernel_utils.h"
#include "fused_kernels.h"

namespace seqmix::ops {
namespace {

constexpr double kInitialMax = -1e30;  // the running max before the first key

struct Dims {
  int64_t B, T, H, dk, dv;
};

// row += scale * x over n entries.
template <typename S>
inline void axpy(S* row, const S* x, S scale, int64_t n) {
  for (int64_t e = 0; e < n; ++e) row[e] += scale * x[e];
}
template <typename S>
inline void scale_row(S* row, S scale, int64_t n) {
  for (int64_t e = 0; e < n; ++e) row[e] *= scale;
}
// Moves the state (P [dk,dv], z [dk]) from the running max `from` to `to` (to >= from channel-wise).
template <typename S>
inline void rescale_state(S* P, S* z, const S* from, const S* to, int64_t dk, int64_t dv) {
  for (int64_t d = 0; d < dk; ++d) {
    if (to[d] == from[d]) continue;
    const S s = kernel::fast_exp(from[d] - to[d]);
    scale_row(P + d * dv, s, dv);
    z[d] *= s;
  }
}

// phi_d = exp(q_d + r_d - max_d'(q_d' + r_d')).
template <typename S>
inline void query_features(const S* q, const S* r, int64_t dk, S* phi) {
  for (int64_t d = 0; d < dk; ++d) phi[d] = q[d] + r[d];
  const S c = kernel::row_max(phi, dk);
  for (int64_t d = 0; d < dk; ++d) phi[d] = kernel::fast_exp(phi[d] - c);
}

// Adds key t to the state at the running max r (already updated to include it).
template <typename S>
inline void add_key(S* P, S* z, const S* k, const S* v, const S* r, int64_t dk, int64_t dv) {
  for (int64_t d = 0; d < dk; ++d) {
    const S w = kernel::fast_exp(k[d] - r[d]);
    axpy(P + d * dv, v, w, dv);
    z[d] += w;
  }
}

template <typename S>
void forward_kernel(const S* q, const S* k, const S* v, S* y, S* normaliser, S* key_max, const Dims& n) {
  at::parallel_for(0, n.B * n.H, 1, [&](int64_t begin, int64_t end) {
    std::vector<S> P(n.dk * n.dv), z(n.dk), r(n.dk), r_new(n.dk), phi(n.dk), num(n.dv);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / n.H, h = task % n.H;
      std::fill(P.begin(), P.end(), S(0));
      std::fill(z.begin(), z.end(), S(0));
      std::fill(r.begin(), r.end(), static_cast<S>(kInitialMax));
      for (int64_t t = 0; t < n.T; ++t) {
        const int64_t row = (b * n.T + t) * n.H + h;
        const S *qt = q + row * n.dk, *kt = k + row * n.dk, *vt = v + row * n.dv;
        for (int64_t d = 0; d < n.dk; ++d) r_new[d] = kt[d] > r[d] ? kt[d] : r[d];
        rescale_state(P.data(), z.data(), r.data(), r_new.data(), n.dk, n.dv);
        std::swap(r, r_new);
        add_key(P.data(), z.data(), kt, vt, r.data(), n.dk, n.dv);
        query_features(qt, r.data(), n.dk, phi.data());
        std::fill(num.begin(), num.end(), S(0));
        for (int64_t d = 0; d < n.dk; ++d) axpy(num.data(), P.data() + d * n.dv, phi[d], n.dv);
        const S den = kernel::dot(phi.data(), z.data(), n.dk);
        for (int64_t e = 0; e < n.dv; ++e) y[row * n.dv + e] = num[e] / den;
        normaliser[row] = den;
        std::copy(r.begin(), r.end(), key_max + row * n.dk);
      }
    }
  });
}

// With gN_t = g_t / den_t and gD_t = -(g_t . y_t) / den_t (the gradients of numerator and normaliser):
//   dq_td = phi_td (P_td . gN_t + z_td gD_t)                              (forward rescan)
//   G_jd = sum_{t>=j} phi_td exp(r_jd - r_td) gN_t,  Hs_jd = same with gD_t (reverse scan)
//   dv_j = sum_d exp(k_jd - r_jd) G_jd,   dk_jd = exp(k_jd - r_jd) (v_j . G_jd + Hs_jd).
template <typename S>
void backward_kernel(const S* g, const S* q, const S* k, const S* v, const S* y, const S* normaliser,
                     const S* key_max, S* dq, S* dk, S* dv, const Dims& n) {
  at::parallel_for(0, n.B * n.H, 1, [&](int64_t begin, int64_t end) {
    std::vector<S> P(n.dk * n.dv), z(n.dk), r_prev(n.dk), phi(n.dk), gN(n.dv);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / n.H, h = task % n.H;
      auto row_of = [&](int64_t t) { return (b * n.T + t) * n.H + h; };
      // The upstream gradients of numerator and normaliser at row `row` (gN into the buffer).
      auto split_gradient = [&](int64_t row) {
        const S den = normaliser[row];
        const S* gt = g + row * n.dv;
        for (int64_t e = 0; e < n.dv; ++e) gN[e] = gt[e] / den;
        return -kernel::dot(gt, y + row * n.dv, n.dv) / den;
      };
      // Pass 1: the forward scan again, for dq.
      std::fill(P.begin(), P.end(), S(0));
      std::fill(z.begin(), z.end(), S(0));
      std::fill(r_prev.begin(), r_prev.end(), static_cast<S>(kInitialMax));
      for (int64_t t = 0; t < n.T; ++t) {
        const int64_t row = row_of(t);
        const S* r = key_max + row * n.dk;
        rescale_state(P.data(), z.data(), r_prev.data(), r, n.dk, n.dv);
        std::copy(r, r + n.dk, r_prev.begin());
        add_key(P.data(), z.data(), k + row * n.dk, v + row * n.dv, r, n.dk, n.dv);
        query_features(q + row * n.dk, r, n.dk, phi.data());
        const S gD = split_gradient(row);
        for (int64_t d = 0; d < n.dk; ++d)
          dq[row * n.dk + d] = phi[d] * (kernel::dot(P.data() + d * n.dv, gN.data(), n.dv) + z[d] * gD);
      }
      // Pass 2: reverse scan; P and z now hold G and Hs.
      S* G = P.data();
      S* Hs = z.data();
      std::fill(P.begin(), P.end(), S(0));
      std::fill(z.begin(), z.end(), S(0));
      for (int64_t t = n.T - 1; t >= 0; --t) {
        const int64_t row = row_of(t);
        const S* r = key_max + row * n.dk;
        // G_t = phi_t gN_t + exp(r_t - r_{t+1}) G_{t+1}: the same rescale, from r_{t+1} down to r_t.
        if (t + 1 < n.T) {
          const S* r_next = key_max + row_of(t + 1) * n.dk;
          for (int64_t d = 0; d < n.dk; ++d) {
            if (r[d] == r_next[d]) continue;
            const S s = kernel::fast_exp(r[d] - r_next[d]);
            scale_row(G + d * n.dv, s, n.dv);
            Hs[d] *= s;
          }
        }
        query_features(q + row * n.dk, r, n.dk, phi.data());
        const S gD = split_gradient(row);
        for (int64_t d = 0; d < n.dk; ++d) {
          axpy(G + d * n.dv, gN.data(), phi[d], n.dv);
          Hs[d] += phi[d] * gD;
        }
        const S *kt = k + row * n.dk, *vt = v + row * n.dv;
        S* dvt = dv + row * n.dv;
        std::fill(dvt, dvt + n.dv, S(0));
        for (int64_t d = 0; d < n.dk; ++d) {
          const S w = kernel::fast_exp(kt[d] - r[d]);
          axpy(dvt, G + d * n.dv, w, n.dv);
          dk[row * n.dk + d] = w * (kernel::dot(vt, G + d * n.dv, n.dv) + Hs[d]);
        }
      }
    }
  });
}

Dims dims_of(const at::Tensor& q, const at::Tensor& v) {
  return {q.size(0), q.size(1), q.size(2), q.size(3), v.size(3)};
}

}  // namespace

HadamardScanForward hadamard_scan_forward(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in) {
  const char* op = "ela_fused";
  check_linear_scan_args(op, q_in, k_in, v_in);
  check_kernel_inputs(op, {q_in, k_in, v_in});
  auto q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  const Dims n = dims_of(q, v);
  HadamardScanForward out{at::empty({n.B, n.T, n.H, n.dv}, q.options()), at::empty({n.B, n.T, n.H}, q.options()),
                          at::empty({n.B, n.T, n.H, n.dk}, q.options())};
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "hadamard_scan_forward", [&] {
    forward_kernel<scalar_t>(q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                             out.y.data_ptr<scalar_t>(), out.normaliser.data_ptr<scalar_t>(),
                             out.key_max.data_ptr<scalar_t>(), n);
  });
  return out;
}

std::vector<at::Tensor> hadamard_scan_backward(const ElaHadamardBackwardCall& call) {
  auto q = call.q.contiguous(), k = call.k.contiguous(), v = call.v.contiguous(), g = call.grad_y.contiguous();
  const Dims n = dims_of(q, v);
  auto dq = at::empty_like(q), dk = at::empty_like(k), dv = at::empty_like(v);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "hadamard_scan_backward", [&] {
    backward_kernel<scalar_t>(g.data_ptr<scalar_t>(), q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
                              v.data_ptr<scalar_t>(), call.y.data_ptr<scalar_t>(),
                              call.normaliser.data_ptr<scalar_t>(), call.key_max.data_ptr<scalar_t>(),
                              dq.data_ptr<scalar_t>(), dk.data_ptr<scalar_t>(), dv.data_ptr<scalar_t>(), n);
  });
  return {dq, dk, dv};
}

}  // namespace seqmix::ops
