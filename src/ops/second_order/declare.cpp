// The second_order family in the op table and in torch.ops.seqmix: the energy paper's MHA2nd1st and
// LightMHA2nd1st reads, in O(N d) form (fused) or with the covariance formed explicitly (naive).
#include "../common/packing.h"
#include "../common/padding.h"
#include "../common/torch_op.h"
#include "seqmix/ops/op_table.h"
#include "seqmix/ops/second_order.h"

namespace seqmix::ops {

std::vector<BadCall> second_order_bad_calls();

namespace {

// Packed (cu_seqlens): the read of each sequence alone, joined along time.
template <class Read>
at::Tensor each_sequence_read(const char* op, const at::Tensor& q, const at::Tensor& k,
                              const c10::optional<at::Tensor>& cu_seqlens, const Read& read) {
  if (!cu_seqlens.has_value()) return read(0, q.size(1));
  check_packed_attention(op, q, k, at::Tensor(), *cu_seqlens);
  return each_sequence_alone(op, *cu_seqlens, q.size(1), {1}, [&](int64_t begin, int64_t length, int64_t) {
    return std::vector<at::Tensor>{read(begin, length)};
  })[0];
}

at::Tensor mha2nd1st_op(const Mha2nd1stReadCall& call) {
  return each_sequence_read("mha2nd1st_read", call.q, call.k, call.cu_seqlens, [&](int64_t begin, int64_t length) {
    const auto part = [&](const at::Tensor& x) { return call.cu_seqlens ? x.narrow(1, begin, length) : x; };
    const at::Tensor q = part(call.q), k = part(call.k);
    // The chosen form through causal_outputs.
    const bool fused = check_impl(impl_of(call.impl), kSecondOrderImpls, "mha2nd1st_read", q.device()) == Impl::fused;
    return causal_outputs(call.causal, {k}, q, {}, [&](const Window& w) {
      const auto qw = w.queries(q, k), kw = w.keys(k);
      return std::vector<at::Tensor>{
          fused ? mha2nd1st_read_fused(qw, kw, call.temperature, call.bias_scale, call.causal)
                : mha2nd1st_read_covariance(qw, kw, call.temperature, call.bias_scale, call.causal)};
    })[0];
  });
}

at::Tensor light2nd1st_op(const Light2nd1stReadCall& call) {
  return each_sequence_read("light2nd1st_read", call.q, call.k, call.cu_seqlens, [&](int64_t begin, int64_t length) {
    const auto part = [&](const at::Tensor& x) { return call.cu_seqlens ? x.narrow(1, begin, length) : x; };
    const at::Tensor q = part(call.q), k = part(call.k), v = part(call.v);
    // The chosen form through causal_outputs.
    const bool fused = check_impl(impl_of(call.impl), kSecondOrderImpls, "light2nd1st_read", q.device()) == Impl::fused;
    return causal_outputs(call.causal, {k, v}, q, {}, [&](const Window& w) {
      const auto qw = w.queries(q, k), kw = w.keys(k), vw = w.keys(v);
      return std::vector<at::Tensor>{
          fused ? light2nd1st_read_fused(qw, kw, vw, call.scale, call.tau, call.causal)
                : light2nd1st_read_covariance(qw, kw, vw, call.scale, call.tau, call.causal)};
    })[0];
  });
}

OpFamily declare_second_order() {
  return {.name = "second_order",
          .bad_calls = second_order_bad_calls};
}

}  // namespace

SEQMIX_OP_FAMILY(declare_second_order);

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_op<&mha2nd1st_op>(m, "mha2nd1st_read(Tensor q, Tensor k, Tensor temperature, Tensor bias_scale, "
                              "bool causal=True, str impl='auto', Tensor? cu_seqlens=None) -> Tensor",
      R"doc(MHA2nd1st's read u + c Cov_p(k) u, u = q - E_p[k], p_j = softmax_j(-(||q - k_j||^2) / (2 T_h)).
q [B,T,H,d], k [B,S,H,d], temperature [H] > 0, bias_scale [H] -> [B,T,H,d]. "naive" forms Cov_p(k).
cu_seqlens packs sequences (each read alone: eager only).)doc", kSecondOrderImpls);
  define_op<&light2nd1st_op>(m, "light2nd1st_read(Tensor q, Tensor k, Tensor v, float scale, Tensor tau, "
                                "bool causal=True, str impl='auto', Tensor? cu_seqlens=None) -> Tensor",
      R"doc(LightMHA2nd1st's read vbar + tau Cov_p(v) vbar, vbar = E_p[v], p = softmax(scale q k^T).
q, k [B,*,H,dk], v [B,S,H,dv], tau [H] -> [B,T,H,dv]. "naive" forms Cov_p(v). cu_seqlens packs sequences
(each read alone: eager only).)doc", kSecondOrderImpls);
}
