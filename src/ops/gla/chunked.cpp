// Gated linear attention in chunks, in ATen matrix products (include/seqmix/ops/gla.h; README.md derives it): the
// form that runs on any device with O(T) memory, the scan's implementation on a GPU until a CUDA kernel exists.
#include <ATen/ATen.h>

#include <limits>
#include <vector>

#include "../common/checks.h"
#include "../common/packing.h"
#include "seqmix/ops/gla.h"

namespace seqmix::ops {
namespace {

// One sequence (or an unpacked batch): q, k [B,T,H,dk], v [B,T,H,dv], log_decay [B,T,H] or [B,T,H,dk].
PriorRead gla_chunked_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_decay) {
  const bool per_key = log_decay.dim() == 4;
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), dk = q.size(3), dv = v.size(3);
  if (T == 0) return {at::zeros({B, 0, H, dv}, v.options()), at::zeros({B, 0, H}, v.options())};
  const int64_t C = per_key ? 16 : 64, N = (T + C - 1) / C, padded = N * C;
  // Zeros after the end: keys of zero and no decay change nothing before T.
  const auto pad = [&](const at::Tensor& x) {  // x [B,T,H,w]
    return padded == T ? x : at::cat({x, at::zeros({B, padded - T, H, x.size(3)}, x.options())}, 1);
  };
  // [B,T,H,w] -> [B,H,N,C,w]
  const auto chunks = [&](const at::Tensor& x) {
    return pad(x).view({B, N, C, H, x.size(3)}).permute({0, 3, 1, 2, 4});
  };
  const auto qc = chunks(q), kc = chunks(k);
  const auto vc = chunks(at::cat({v, at::ones({B, T, H, 1}, v.options())}, -1));  // [.., dv+1]: the last is z
  // a: [B,H,N,C] per head, [B,H,N,C,dk] per key; c_t = the log decay from the chunk's start through t.
  const auto a = per_key ? chunks(log_decay) : chunks(log_decay.unsqueeze(-1)).squeeze(-1);
  const auto c = a.cumsum(3);
  const auto total = c.select(3, C - 1);  // [B,H,N(,dk)]: the whole chunk's log decay

  // Within a chunk: w_ti = sum_f q_tf k_if exp(c_t - c_i) for i <= t (every exponent <= 0).
  const auto hidden = at::ones({C, C}, q.options().dtype(at::kBool)).triu(1);  // i > t
  at::Tensor weights;  // [B,H,N,C(t),C(i)]
  if (per_key) {
    auto exponent = c.unsqueeze(4) - c.unsqueeze(3);  // [B,H,N,t,i,dk]
    exponent = exponent.masked_fill(hidden.unsqueeze(-1), -std::numeric_limits<double>::infinity());
    weights = (qc.unsqueeze(4) * kc.unsqueeze(3) * exponent.exp()).sum(-1);
  } else {
    auto exponent = c.unsqueeze(4) - c.unsqueeze(3);  // [B,H,N,t,i]
    exponent = exponent.masked_fill(hidden, -std::numeric_limits<double>::infinity());
    weights = at::matmul(qc, kc.transpose(-1, -2)) * exponent.exp();
  }
  const auto intra = at::matmul(weights, vc);  // [B,H,N,C,dv+1]

  // Across chunks: S_n, the state after chunk n, is exp(total_n) S_{n-1} + sum_i (k_i exp(total_n - c_i)) v_i^T;
  // a query t of chunk n reads (q_t exp(c_t)) S_{n-1}. Decays per head scale every row of S alike.
  const auto per_feature = [&](const at::Tensor& x) { return per_key ? x : x.unsqueeze(-1); };
  const auto k_to_end = kc * per_feature(total.unsqueeze(3) - c).exp();   // [B,H,N,C,dk]
  const auto q_from_start = qc * per_feature(c).exp();                     // [B,H,N,C,dk]
  const auto chunk_states = at::matmul(k_to_end.transpose(-1, -2), vc);  // [B,H,N,dk,dv+1]
  const auto chunk_decay = per_feature(total.exp()).unsqueeze(-1);       // [B,H,N,dk|1,1]
  at::Tensor state = at::zeros({B, H, dk, dv + 1}, q.options());
  std::vector<at::Tensor> inter;
  inter.reserve(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    inter.push_back(at::matmul(q_from_start.select(2, n), state));  // [B,H,C,dv+1]
    state = chunk_decay.select(2, n) * state + chunk_states.select(2, n);
  }
  const auto out = (intra + at::stack(inter, 2)).permute({0, 2, 3, 1, 4}).reshape({B, padded, H, dv + 1}).narrow(1, 0, T);
  return {out.narrow(-1, 0, dv), out.select(-1, dv)};
}

}  // namespace

PriorRead gla_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_decay,
                      const at::Tensor& cu_seqlens) {
  const char* op = "gla_chunked";
  TORCH_CHECK(log_decay.defined(), op, ": log_decay is required ([B,T,H] or [B,T,H,dk])");
  check_linear_scan_args(op, q, k, v, log_decay);
  check_cu_seqlens(op, cu_seqlens, q.size(0), q.size(1));
  if (!cu_seqlens.defined()) return gla_chunked_rows(q, k, v, log_decay);
  // Packed: each sequence from a zero state, alone (a chunk never straddles two sequences).
  const auto joined = each_sequence_alone(op, cu_seqlens, q.size(1), {1, 1}, [&](int64_t begin, int64_t length, int64_t) {
    const auto part = [&](const at::Tensor& x) { return x.narrow(1, begin, length); };
    if (length == 0)
      return std::vector<at::Tensor>{at::zeros({1, 0, v.size(2), v.size(3)}, v.options()),
                                     at::zeros({1, 0, v.size(2)}, v.options())};
    const PriorRead r = gla_chunked_rows(part(q), part(k), part(v), part(log_decay));
    return std::vector<at::Tensor>{r.numerator, r.normaliser};
  });
  return {joined[0], joined[1]};
}

}  // namespace seqmix::ops
