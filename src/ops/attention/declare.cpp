// The attention family in the op table and in torch.ops.seqmix: softmax attention (fused, naive, or PyTorch's
// own kernel) and HyperMLP's ReLU read.
#include "../common/bench_inputs.h"
#include "../common/padding.h"
#include "../common/torch_op.h"
#include "seqmix/ops/attention.h"
#include "seqmix/ops/op_table.h"

namespace seqmix::ops {

std::vector<BadCall> attention_bad_calls();

namespace {

double scale_or_default(c10::optional<double> scale, const at::Tensor& q) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

// The chosen implementation through causal_outputs.
at::Tensor attention_op(const AttentionCall& call) {
  const double scale = scale_or_default(call.scale, call.q);
  const at::Tensor key_mask = or_undefined(call.key_mask);
  const Impl chosen = check_impl(impl_of(call.impl), kSoftmaxAttentionImpls, "softmax_attention", call.q.device());
  const auto read = [&](const Window& w) -> at::Tensor {
    const auto qw = w.queries(call.q, call.k), kw = w.keys(call.k), vw = w.keys(call.v), mask = w.keys(key_mask);
    // check_impl took fused, naive or torch.
    return chosen == Impl::fused   ? softmax_attention_fused(qw, kw, vw, call.causal, scale, mask, w.cu_seqlens)
           : chosen == Impl::torch ? softmax_attention_torch(qw, kw, vw, call.causal, scale, mask, w.cu_seqlens)
                                   : softmax_attention_naive(qw, kw, vw, call.causal, scale, mask, w.cu_seqlens);
  };
  return causal_outputs(call.causal, {call.k, call.v}, call.q, or_undefined(call.cu_seqlens), [&](const Window& w) {
    return std::vector<at::Tensor>{read(w)};
  })[0];
}

at::Tensor relu_attention_op(const ReluAttentionCall& call) {
  return relu_attention_naive(call.q, call.k, call.v, call.causal, call.eps);
}

// Causal attention on q, k [B,T,H,dk], v [B,T,H,dv] ~ N(0, 1), scale 1/sqrt(dk).
OpCase attention_case(Impl impl, const OpShape& s) {
  using bench_inputs::randn;
  const auto q = randn({s.batch, s.length, s.heads, s.dk});
  const auto k = randn({s.batch, s.length, s.heads, s.dk});
  const auto v = randn({s.batch, s.length, s.heads, s.dv});
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.dk));
  return {[=] { return std::vector<at::Tensor>{attention(q, k, v, {.causal = true, .scale = scale, .impl = impl})}; }, {q, k, v}};
}

OpFamily declare_attention() {
  const BenchCaseDeclaration attention{
      .name = "attention",
      .order = 10,
      .inputs = "q, k [B,T,H,dk], v [B,T,H,dv], scale 1/sqrt(dk)",
      .impls = kSoftmaxAttentionImpls,
      .make = attention_case,
      .forward_flops = [](const OpShape& s) -> std::optional<double> {
        const double pairs = s.length * (s.length + 1.0) / 2;  // causal
        return 2.0 * s.batch * s.heads * pairs * (s.dk + s.dv);
      }};
  return {.name = "attention",
          .bench_cases = {attention},
          .bad_calls = attention_bad_calls};
}

}  // namespace

SEQMIX_OP_FAMILY(declare_attention);

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_op<&attention_op>(m, "attention(Tensor q, Tensor k, Tensor v, bool causal=True, float? scale=None, "
                              "Tensor? key_mask=None, str impl='auto', Tensor? cu_seqlens=None) -> Tensor",
      R"doc(Softmax attention softmax_j(scale q_t . k_j) v_j (flash-style when fused: no T x S matrix).

q [B,T,H,dk], k [B,S,H,dk], v [B,S,H,dv] -> [B,T,H,dv]. scale defaults to 1/sqrt(dk); causal lets query t
see keys j <= t + S - T; key_mask [B,S] bool (True = a real key) drops padded keys (whatever they hold).
cu_seqlens (int64 [N+1], flash-attn's convention) packs N sequences into q, k, v [1, total_T, H, d]: each
query sees only its own sequence, so the output equals each sequence run alone.)doc", kSoftmaxAttentionImpls);
  define_op<&relu_attention_op>(m, "relu_attention(Tensor q, Tensor k, Tensor v, bool causal=True, float eps=1e-12) "
                                   "-> Tensor",
      R"doc(HyperMLP's "R" read: ReLU(s_t / sqrt(||s_t||^2 + eps)) v with s_t = (q_t . k_j)_j over the visible keys.

q [B,T,H,dk], k [B,S,H,dk], v [B,S,H,dv] -> [B,T,H,dv].)doc");
}
