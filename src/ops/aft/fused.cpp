// Fused AFT prior on the CPU: one forward pass per (batch, channel group), per packed sequence when cu_seqlens
// gives them, carrying the running max,
// numerator and normaliser of a group of channels in local buffers, and one reverse scan for the
// backward with accumulators relative to the running max (every exponent <= 0). The channels are the
// contiguous axis, so the inner loops vectorise. Derivation in README.md.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "../common/checks.h"
#include "../common/kernel_utils.h"
#include "../common/packing.h"
#include "fused_kernels.h"
#include "seqmix/ops/aft.h"

namespace seqmix::ops {
namespace {

constexpr int64_t kChannelGroup = 64;
constexpr double kInitialMax = -1e30;  // the running max before any real token (aft_initial_state)

struct Group {
  int64_t batch, first_channel, width;
};
Group group_of(int64_t task, int64_t groups, int64_t C) {
  const int64_t c0 = (task % groups) * kChannelGroup;
  return {task / groups, c0, std::min(kChannelGroup, C - c0)};
}

// k, v, numerator, normaliser, key_max [B,T,C]; mask [B,T] or null; the state starts fresh at each sequence of
// `sequences` (the whole row, or the packed ones).
template <typename S>
void forward_kernel(const S* k, const S* v, const bool* mask, S* numerator, S* normaliser, S* key_max, int64_t B,
                    int64_t T, int64_t C, const std::vector<Segment>& sequences) {
  const int64_t groups = (C + kChannelGroup - 1) / kChannelGroup;
  at::parallel_for(0, B * groups, 1, [&](int64_t begin, int64_t end) {
    S m[kChannelGroup], num[kChannelGroup], den[kChannelGroup];
    for (int64_t task = begin; task < end; ++task) {
      const Group g = group_of(task, groups, C);
      for (const Segment& sequence : sequences) {
        std::fill(m, m + g.width, static_cast<S>(kInitialMax));
        std::fill(num, num + g.width, S(0));
        std::fill(den, den + g.width, S(0));
        for (int64_t t = sequence.begin; t < sequence.end; ++t) {
          const int64_t row = (g.batch * T + t) * C + g.first_channel;
          // A padded position leaves the state as it is (the mask is per token, shared by all channels).
          if (!mask || mask[g.batch * T + t]) {
            const S* kt = k + row;
            const S* vt = v + row;
            for (int64_t j = 0; j < g.width; ++j) {
              const S new_max = kt[j] > m[j] ? kt[j] : m[j];
              const S rescale = kernel::fast_exp(m[j] - new_max);
              const S w = kernel::fast_exp(kt[j] - new_max);
              num[j] = num[j] * rescale + w * vt[j];
              den[j] = den[j] * rescale + w;
              m[j] = new_max;
            }
          }
          std::copy(num, num + g.width, numerator + row);
          std::copy(den, den + g.width, normaliser + row);
          std::copy(m, m + g.width, key_max + row);
        }
      }
    }
  });
}

// The reverse scan (README.md): P_t = g_num_t + e^{m_t - m_{t+1}} P_{t+1} (Q_t likewise with g_den), so
// dv_i = e^{k_i - m_i} P_i and dk_i = e^{k_i - m_i} (v_i P_i + Q_i), plus, at each position i that raised
// the running max, R_i = -sum_{t in i's segment} (g_num_t num_t + g_den_t den_t).
template <typename S>
void backward_kernel(const S* grad_num, const S* grad_den, const S* k, const S* v, const bool* mask,
                     const S* numerator, const S* normaliser, const S* key_max, S* dk, S* dv, int64_t B, int64_t T,
                     int64_t C, const std::vector<Segment>& sequences) {
  if (T == 0) return;
  const int64_t groups = (C + kChannelGroup - 1) / kChannelGroup;
  at::parallel_for(0, B * groups, 1, [&](int64_t begin, int64_t end) {
    S p[kChannelGroup], q[kChannelGroup], r[kChannelGroup], next_max[kChannelGroup];
    for (int64_t task = begin; task < end; ++task) {
      const Group g = group_of(task, groups, C);
      // Sequences in reverse, each from its own end: nothing of a sequence's gradient flows into the one before.
      for (auto sequence = sequences.rbegin(); sequence != sequences.rend(); ++sequence) {
        if (sequence->begin == sequence->end) continue;
        std::fill(p, p + g.width, S(0));
        std::fill(q, q + g.width, S(0));
        std::fill(r, r + g.width, S(0));
        std::copy(key_max + (g.batch * T + sequence->end - 1) * C + g.first_channel,
                  key_max + (g.batch * T + sequence->end - 1) * C + g.first_channel + g.width, next_max);
        for (int64_t t = sequence->end - 1; t >= sequence->begin; --t) {
          const int64_t row = (g.batch * T + t) * C + g.first_channel;
          const S* mt = key_max + row;
          const S* gn = grad_num + row;
          const S* gd = grad_den + row;
          const S* nt = numerator + row;
          const S* dt = normaliser + row;
          for (int64_t j = 0; j < g.width; ++j) {
            const S decay = kernel::fast_exp(mt[j] - next_max[j]);
            p[j] = gn[j] + decay * p[j];
            q[j] = gd[j] + decay * q[j];
            r[j] -= gn[j] * nt[j] + gd[j] * dt[j];
            next_max[j] = mt[j];
          }
          S* dkt = dk + row;
          S* dvt = dv + row;
          if (mask && !mask[g.batch * T + t]) {
            std::fill(dkt, dkt + g.width, S(0));
            std::fill(dvt, dvt + g.width, S(0));
            continue;
          }
          const S* kt = k + row;
          const S* vt = v + row;
          // The running max before t; the initial value (a sequence's start) is never a real key's.
          const S* prev_max = t > sequence->begin ? mt - C : nullptr;
          for (int64_t j = 0; j < g.width; ++j) {
            const S before = prev_max ? prev_max[j] : static_cast<S>(kInitialMax);
            const bool raised = mt[j] > before;
            const S w = kernel::fast_exp(kt[j] - mt[j]);
            dvt[j] = w * p[j];
            dkt[j] = w * (vt[j] * p[j] + q[j]) + (raised ? r[j] : S(0));
            r[j] = raised ? S(0) : r[j];
          }
        }
      }
    }
  });
}

void check_fused_aft_args(const char* op, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask) {
  check_aft_args(op, k, v, mask);
  check_kernel_inputs(op, {k, v, mask});
}

}  // namespace

std::vector<at::Tensor> aft_fused_forward(const AftForwardCall& call) {
  const at::Tensor &k_in = call.k, &v_in = call.v;
  const at::Tensor mask_in = call.mask.value_or(at::Tensor()), cu_seqlens = call.cu_seqlens.value_or(at::Tensor());
  check_fused_aft_args("aft_fused", k_in, v_in, mask_in);
  check_cu_seqlens("aft_fused", cu_seqlens, k_in.size(0), k_in.size(1));
  auto k = k_in.contiguous(), v = v_in.contiguous();
  const auto mask = mask_in.defined() ? mask_in.contiguous() : at::Tensor();
  auto numerator = at::empty_like(k), normaliser = at::empty_like(k), key_max = at::empty_like(k);
  AT_DISPATCH_FLOATING_TYPES(k.scalar_type(), "aft_fused_forward", [&] {
    forward_kernel<scalar_t>(k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(), mask.defined() ? mask.data_ptr<bool>() : nullptr,
                             numerator.data_ptr<scalar_t>(), normaliser.data_ptr<scalar_t>(), key_max.data_ptr<scalar_t>(),
                             k.size(0), k.size(1), k.size(2), sequence_segments(cu_seqlens, k.size(1)));
  });
  return {numerator, normaliser, key_max};
}

std::vector<at::Tensor> aft_fused_backward(const AftBackwardCall& call) {
  const at::Tensor &grad_numerator = call.grad_numerator, &grad_normaliser = call.grad_normaliser;
  const at::Tensor &k_in = call.k, &v_in = call.v;
  const at::Tensor &numerator_in = call.numerator, &normaliser_in = call.normaliser, &key_max_in = call.key_max;
  const at::Tensor mask_in = call.mask.value_or(at::Tensor()), cu_seqlens = call.cu_seqlens.value_or(at::Tensor());
  check_fused_aft_args("aft_fused backward", k_in, v_in, mask_in);
  for (const auto* t : {&grad_numerator, &grad_normaliser, &numerator_in, &normaliser_in, &key_max_in})
    TORCH_CHECK(t->sizes() == k_in.sizes() && t->scalar_type() == k_in.scalar_type(),
                "aft_fused backward: saved tensors and gradients must match k (", k_in.sizes(), ", ", k_in.scalar_type(), ")");
  auto k = k_in.contiguous(), v = v_in.contiguous();
  auto gn = grad_numerator.contiguous(), gd = grad_normaliser.contiguous();
  auto num = numerator_in.contiguous(), den = normaliser_in.contiguous(), m = key_max_in.contiguous();
  const auto mask = mask_in.defined() ? mask_in.contiguous() : at::Tensor();
  auto dk = at::empty_like(k), dv = at::empty_like(v);
  AT_DISPATCH_FLOATING_TYPES(k.scalar_type(), "aft_fused_backward", [&] {
    backward_kernel<scalar_t>(gn.data_ptr<scalar_t>(), gd.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
                              v.data_ptr<scalar_t>(), mask.defined() ? mask.data_ptr<bool>() : nullptr,
                              num.data_ptr<scalar_t>(), den.data_ptr<scalar_t>(), m.data_ptr<scalar_t>(),
                              dk.data_ptr<scalar_t>(), dv.data_ptr<scalar_t>(), k.size(0), k.size(1), k.size(2),
                              sequence_segments(cu_seqlens, k.size(1)));
  });
  return {dk, dv};
}

}  // namespace seqmix::ops
