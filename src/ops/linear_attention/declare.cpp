// The linear_attention family in the op table and in torch.ops.seqmix: normalised linear attention (fused
// chunked scan or naive), its decode step and state, and the FEM read through it.
#include "../common/bench_inputs.h"
#include "../common/checks.h"
#include "../common/gpu_kernels.h"
#include "../common/internal.h"
#include "../common/padding.h"
#include "../common/torch_op.h"
#include "seqmix/ops/fem.h"
#include "seqmix/ops/linear_attention.h"
#include "seqmix/ops/op_table.h"

namespace seqmix::ops {

std::vector<BadCall> linear_attention_bad_calls();

namespace {

// With a state (fla's initial_state / output_final_state, causal only): the read continued from kv, k_sum and the
// state after the last position; packed (cu_seqlens), one state per sequence.
ReadAndState linear_attention_op(const LinearAttentionCall& call) {
  const at::Tensor &q = call.q, &k = call.k, &v = call.v;
  // Precision::reduced_on_cuda: the GPU kernels (impl=fused, causal, on CUDA) read bfloat16/float16 as it is when
  // q, k and v share that dtype and no state comes in or out; every other call reads in float32.
  using reduced_precision::is_reduced;
  if (q.is_cuda() && (is_reduced(q) || is_reduced(k) || is_reduced(v) || reduced_precision::reduced_dtype(call.kv) ||
                      reduced_precision::reduced_dtype(call.k_sum))) {
    const bool as_given = call.causal &&
                          check_impl(impl_of(call.impl), kLinearAttentionImpls, "linear_attention", q.device()) ==
                              Impl::fused &&
                          is_reduced(q) && k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() &&
                          !call.kv && !call.k_sum && !call.output_final_state;
    if (!as_given) return reduced_precision::in_float32<&linear_attention_op>(call);
  }
  const at::Tensor qs = scaled(q, call.scale), offsets = or_undefined(call.cu_seqlens);
  const LinearAttentionState initial{or_undefined(call.kv), or_undefined(call.k_sum)};
  TORCH_CHECK(call.causal || (!initial.kv.defined() && !initial.k_sum.defined() && !call.output_final_state),
              "linear_attention: a state (kv, k_sum or output_final_state) needs causal=True");
  const Impl impl = impl_of(call.impl);
  Impl chosen = check_impl(impl, kLinearAttentionImpls, "linear_attention", q.device());
  // auto on a GPU takes the fused kernels of the causal scan (once they have passed there) only for inputs they
  // read; else the chunked form.
  using namespace gpu_kernels;
  const int64_t sequences = offsets.defined() ? offsets.numel() - 1 : q.size(0);
  if (impl == Impl::automatic && chosen == Impl::fused && call.causal && !q.device().is_cpu() &&
      !(reads_dtype(q.scalar_type()) && reads_width(q.size(-1)) && reads_width(v.size(-1)) &&
        sequences * q.size(2) <= kMaxPrograms))
    chosen = Impl::chunked;
  // The read from a zero state, each window of positions by the chosen implementation (causal_outputs)...
  const auto r = causal_outputs(call.causal, {k, v}, qs, offsets, [&](const Window& w) {
    const auto qw = w.queries(qs, k), kw = w.keys(k), vw = w.keys(v);
    const PriorRead read = chosen == Impl::fused ? linear_attention_fused(qw, kw, vw, call.causal, w.cu_seqlens)
                           : chosen == Impl::chunked
                               ? linear_attention_chunked(qw, kw, vw, call.causal, w.cu_seqlens)
                               : linear_attention_naive(qw, kw, vw, call.causal, w.cu_seqlens);
    return std::vector<at::Tensor>{read.numerator, read.normaliser};
  });
  // ... then the initial state's share and the final state, in closed form (src/ops/gla/state.cpp).
  const ReadWithState continued =
      continue_packed_scan({r[0], r[1]}, qs, k, v, at::Tensor(), initial, call.output_final_state, offsets);
  return {continued.read.numerator, continued.read.normaliser, continued.final_state.kv, continued.final_state.k_sum};
}

// Decode, functional: the state goes in and the updated state comes out (nothing is modified). q_t, k_t [B,H,dk],
// v_t [B,H,dv] -> numerator [B,1,H,dv], normaliser [B,1,H].
LinearAttentionStepCall::Result linear_attention_step_op(const LinearAttentionStepCall& call) {
  const at::Tensor &q_t = call.q_t, &k_t = call.k_t, &v_t = call.v_t;
  const char* op = "linear_attention_step";
  check_scan_step_args(op, q_t, k_t, v_t, call.kv, call.k_sum);
  check_state_features_are_keys(op, q_t, call.kv);
  const auto kv = call.kv + k_t.unsqueeze(-1) * v_t.unsqueeze(-2);
  const auto k_sum = call.k_sum + k_t;
  return {(q_t.unsqueeze(-1) * kv).sum(-2).unsqueeze(1), (q_t * k_sum).sum(-1).unsqueeze(1), kv, k_sum};
}

// The decode state before the first token: zeros, kv [B,H,dk,dv] and k_sum [B,H,dk].
TensorPair linear_attention_initial_state_op(const LinearAttentionInitialStateCall& call) {
  const at::TensorOptions options = options_of(call.dtype, call.device);
  check_state_args("linear_attention_initial_state",
                   {{"batch", call.batch}, {"heads", call.heads}, {"dk", call.dk}, {"dv", call.dv}}, options);
  return {at::zeros({call.batch, call.heads, call.dk, call.dv}, options),
          at::zeros({call.batch, call.heads, call.dk}, options)};
}

// The FEM read under the linear-attention prior w_tj = q_t . k_j (q, k non-negative features).
TensorPair fem_linear_read_op(const FemLinearReadCall& call) {
  TORCH_CHECK(call.v.dim() == 4, "fem_linear_read: v must be [B,T,H,dv] (got ", call.v.sizes(), ")");
  check_impl(impl_of(call.impl), kLinearAttentionImpls, "fem_linear_read", call.q.device());  // the error names this op
  check_fem_prior_read_impl("fem_linear_read", "linear_attention", impl_of(call.impl), call.q.device());
  const FemRead r = fem_capped_read("fem_linear_read", call.v, call.beta, call.cap, [&](const at::Tensor& values) {
    const auto type = values.scalar_type();
    const auto [numerator, normaliser, kv, k_sum] = linear_attention_op(
        LinearAttentionCall{.q = call.q.to(type), .k = call.k.to(type), .v = values, .causal = call.causal,
                            .impl = call.impl, .kv = c10::nullopt, .k_sum = c10::nullopt, .cu_seqlens = call.cu_seqlens});
    return normalised_read_op(NormalisedReadCall{numerator, normaliser, kPriorNormaliserFloor});
  });
  return {r.mean, r.free_energy};
}

// Causal, on non-negative features q, k = relu(randn) + 1e-6 [B,T,H,dk] and v [B,T,H,dv].
OpCase linear_attention_case(Impl impl, const OpShape& s) {
  const auto q = bench_inputs::features({s.batch, s.length, s.heads, s.dk});
  const auto k = bench_inputs::features({s.batch, s.length, s.heads, s.dk});
  const auto v = bench_inputs::randn({s.batch, s.length, s.heads, s.dv});
  return {[=] {
            const auto r = linear_attention(q, k, v, {.causal = true, .impl = impl});
            return std::vector<at::Tensor>{r.numerator, r.normaliser};
          },
          {q, k, v}};
}

OpFamily declare_linear_attention() {
  const BenchCaseDeclaration scan{
      .name = "linear_attention",
      .order = 30,
      .inputs = "q, k = relu(randn) + 1e-6 [B,T,H,dk], v [B,T,H,dv]",
      .impls = kLinearAttentionImpls,
      .make = linear_attention_case,
      .forward_flops = [](const OpShape& s) -> std::optional<double> {
        return 4.0 * s.batch * s.length * s.heads * s.dk * s.dv;  // the state path
      }};
  return {.name = "linear_attention",
          .bench_cases = {scan},
          .bad_calls = linear_attention_bad_calls};
}

}  // namespace

SEQMIX_OP_FAMILY(declare_linear_attention);

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_op<&linear_attention_op>(m, "linear_attention(Tensor q, Tensor k, Tensor v, bool causal=True, "
                                     "str impl='auto', float? scale=None, Tensor? kv=None, Tensor? k_sum=None, "
                                     "bool output_final_state=False, Tensor? cu_seqlens=None) -> (Tensor numerator, "
                                     "Tensor normaliser, Tensor kv, Tensor k_sum)",
      R"doc(Linear attention's (numerator, normaliser): sum_j (q_t . k_j) v_j and sum_j q_t . k_j over j <= t
(causal) or all j. q, k [B,T,H,dk], v [B,T,H,dv] -> [B,T,H,dv] and [B,T,H].

As flash-linear-attention: scale multiplies q (default: none); initial_state (kv [B,H,dk,dv], k_sum [B,H,dk])
continues the scan from earlier positions (causal); output_final_state=True also returns the state after the
last position, (numerator, normaliser, (kv, k_sum)), ready to be the next chunk's initial_state. cu_seqlens
(int64 [N+1]) packs N sequences into [1, total_T, ...], each read alone (states [N, ...]).)doc", kLinearAttentionImpls,
      Precision::reduced_on_cuda);
  define_op<&linear_attention_step_op>(m, "linear_attention_step(Tensor q_t, Tensor k_t, Tensor v_t, Tensor kv, "
                                          "Tensor k_sum) -> (Tensor numerator, Tensor normaliser, Tensor kv, "
                                          "Tensor k_sum)",
      R"doc(One causal step: q_t, k_t [B,H,dk], v_t [B,H,dv] -> (numerator [B,1,H,dv], normaliser [B,1,H], state).)doc");
  define_op_without_tensors<&linear_attention_initial_state_op>(
      m, "linear_attention_initial_state(int batch, int heads, int dk, int dv, ScalarType? dtype=None, Device? device=None) "
         "-> (Tensor kv, Tensor k_sum)",
      R"doc(Empty causal state (kv [B,H,dk,dv], k_sum [B,H,dk]) of linear_attention_step and gla_step.)doc");
  define_op<&fem_linear_read_op>(m, "fem_linear_read(Tensor q, Tensor k, Tensor v, Tensor beta, float cap=40., "
                                    "bool causal=True, str impl='auto', Tensor? cu_seqlens=None) "
                                    "-> (Tensor mean, Tensor free_energy)",
      R"doc(The FEM read under the linear-attention prior w_tj = q_t . k_j (q, k non-negative features):
(mean, free_energy), computed as the FEM layer does (one read of [clip(v), exp(beta clip(v) - cap)] in
float64). q, k [B,T,H,dk], v [B,T,H,dv], beta [H*dv] -> two [B,T,H,dv]. cu_seqlens packs sequences as in
linear_attention.)doc", kLinearAttentionImpls);
}
