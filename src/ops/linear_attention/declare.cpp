// The linear_attention family in the op table and in torch.ops.seqmix: normalised linear attention (fused
// chunked scan or naive), its decode step and state, and the FEM read through it.
#include "../common/bench_inputs.h"
#include "../common/gpu_kernels.h"
#include "../common/padding.h"
#include "../common/torch_op.h"
#include "seqmix/ops/fem.h"
#include "seqmix/ops/linear_attention.h"
#include "seqmix/ops/op_table.h"

namespace seqmix::ops::native {

PriorRead linear_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, Impl impl,
                           const at::Tensor& cu_seqlens) {
  Impl chosen = check_impl(impl, kLinearAttentionImpls, "linear_attention", q.device());
  // auto on a GPU takes the fused kernels of the causal scan (once they have passed there) only for inputs they
  // read; else the chunked form.
  using namespace gpu_kernels;
  const int64_t sequences = cu_seqlens.defined() ? cu_seqlens.numel() - 1 : q.size(0);
  if (impl == Impl::automatic && chosen == Impl::fused && causal && !q.device().is_cpu() &&
      !(reads_dtype(q.scalar_type()) && reads_width(q.size(-1)) && reads_width(v.size(-1)) &&
        sequences * q.size(2) <= kMaxPrograms))
    chosen = Impl::chunked;
  const auto r = causal_outputs(causal, {k, v}, q, cu_seqlens, [&](const Window& w) {
    const auto qw = w.queries(q, k), kw = w.keys(k), vw = w.keys(v);
    const PriorRead read = chosen == Impl::fused     ? linear_attention_fused(qw, kw, vw, causal, w.cu_seqlens)
                           : chosen == Impl::chunked ? linear_attention_chunked(qw, kw, vw, causal, w.cu_seqlens)
                                                     : linear_attention_naive(qw, kw, vw, causal, w.cu_seqlens);
    return std::vector<at::Tensor>{read.numerator, read.normaliser};
  });
  return {r[0], r[1]};
}

}  // namespace seqmix::ops::native

namespace seqmix::ops {

std::vector<BadCall> linear_attention_bad_calls();

namespace {

// With a state (fla's initial_state / output_final_state, causal only): the read continued from kv, k_sum and the
// state after the last position; packed (cu_seqlens), one state per sequence.
ReadAndState linear_attention_op(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                 c10::string_view impl, c10::optional<double> scale, const c10::optional<at::Tensor>& kv,
                                 const c10::optional<at::Tensor>& k_sum, bool output_final_state,
                                 const c10::optional<at::Tensor>& cu_seqlens) {
  // Precision::reduced_on_cuda: the GPU kernels (impl=fused, causal, on CUDA) read bfloat16/float16 as it is when
  // q, k and v share that dtype and no state comes in or out; every other call reads in float32.
  using reduced_precision::is_reduced;
  if (q.is_cuda() && (is_reduced(q) || is_reduced(k) || is_reduced(v) || reduced_precision::reduced_dtype(kv) ||
                      reduced_precision::reduced_dtype(k_sum))) {
    const bool as_given = causal &&
                          check_impl(impl_of(impl), kLinearAttentionImpls, "linear_attention", q.device()) ==
                              Impl::fused &&
                          is_reduced(q) && k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() &&
                          !kv && !k_sum && !output_final_state;
    if (!as_given) {
      return reduced_precision::in_float32<&linear_attention_op>(q, k, v, causal, impl, scale, kv, k_sum,
                                                                 output_final_state, cu_seqlens);
    }
  }
  const at::Tensor qs = scaled(q, scale), offsets = or_undefined(cu_seqlens);
  const LinearAttentionState initial{or_undefined(kv), or_undefined(k_sum)};
  TORCH_CHECK(causal || (!initial.kv.defined() && !initial.k_sum.defined() && !output_final_state),
              "linear_attention: a state (kv, k_sum or output_final_state) needs causal=True");
  const ReadWithState r = continue_packed_scan(native::linear_attention(qs, k, v, causal, impl_of(impl), offsets), qs, k, v,
                                               at::Tensor(), initial, output_final_state, offsets);
  return {r.read.numerator, r.read.normaliser, r.final_state.kv, r.final_state.k_sum};
}

// Decode, functional: the state goes in and the updated state comes out (nothing is modified).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> linear_attention_step_op(
    const at::Tensor& q_t, const at::Tensor& k_t, const at::Tensor& v_t, const at::Tensor& kv, const at::Tensor& k_sum) {
  LinearAttentionState state{kv, k_sum};
  const PriorRead r = native::linear_attention_step(q_t, k_t, v_t, state);
  return {r.numerator, r.normaliser, state.kv, state.k_sum};
}

TensorPair linear_attention_initial_state_op(int64_t batch, int64_t heads, int64_t dk, int64_t dv,
                                             c10::optional<at::ScalarType> dtype,
                                             c10::optional<at::Device> device) {
  const LinearAttentionState s = linear_attention_initial_state(batch, heads, dk, dv, options_of(dtype, device));
  return {s.kv, s.k_sum};
}

// The FEM read under the linear-attention prior w_tj = q_t . k_j (q, k non-negative features).
TensorPair fem_linear_read_op(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                              double cap, bool causal, c10::string_view impl,
                              const c10::optional<at::Tensor>& cu_seqlens) {
  TORCH_CHECK(v.dim() == 4, "fem_linear_read: v must be [B,T,H,dv] (got ", v.sizes(), ")");
  const Impl chosen = check_impl(impl_of(impl), kLinearAttentionImpls, "fem_linear_read", q.device());
  const FemRead r = fem_capped_read("fem_linear_read", v, beta, cap, [&](const at::Tensor& values) {
    const auto wq = q.to(values.scalar_type()), wk = k.to(values.scalar_type());
    return native::normalised_read(native::linear_attention(wq, wk, values, causal, chosen, or_undefined(cu_seqlens)),
                           kPriorNormaliserFloor);
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
          .torch_ops = {{"linear_attention", kLinearAttentionImpls},
                        {"linear_attention_step"},
                        {"linear_attention_initial_state"},
                        {"fem_linear_read", kLinearAttentionImpls}},
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
(int64 [N+1]) packs N sequences into [1, total_T, ...], each read alone (states [N, ...]).)doc",
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
linear_attention.)doc");
}
