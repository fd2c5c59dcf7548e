// The gla family in the op table and in torch.ops.seqmix: gated linear attention with a decay per head or per
// key feature (fused scan or naive; packed sequences), its decode step, and the FEM read through it. LRNN-decay is
// benchmarked here too: it is this op with unit features.
#include "../common/bench_inputs.h"
#include "../common/checks.h"
#include "../common/gpu_kernels.h"
#include "../common/internal.h"
#include "../common/padding.h"
#include "../common/torch_op.h"
#include "seqmix/ops/fem.h"
#include "seqmix/ops/gla.h"
#include "seqmix/ops/op_table.h"

namespace seqmix::ops {

std::vector<BadCall> gla_bad_calls();

namespace {

// With a state (fla's initial_state / output_final_state): the read continued from kv, k_sum and the state after
// the last position. Packed (cu_seqlens): one state per sequence, [N,H,dk,dv] and [N,H,dk], in and out.
ReadAndState gla_op(const GlaCall& call) {
  const at::Tensor &q = call.q, &k = call.k, &v = call.v, &log_decay = call.log_decay;
  // Precision::reduced_on_cuda: the GPU kernels (impl=fused on CUDA) read bfloat16/float16 as it is when q, k, v and
  // log_decay share that dtype and no state comes in or out; every other call reads in float32.
  using reduced_precision::is_reduced;
  if (q.is_cuda() && (is_reduced(q) || is_reduced(k) || is_reduced(v) || is_reduced(log_decay) ||
                      reduced_precision::reduced_dtype(call.kv) ||
                      reduced_precision::reduced_dtype(call.k_sum))) {
    const bool as_given = check_impl(impl_of(call.impl), kGlaImpls, "gla", q.device()) == Impl::fused &&
                          is_reduced(q) && k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() &&
                          log_decay.scalar_type() == q.scalar_type() && !call.kv && !call.k_sum &&
                          !call.output_final_state;
    if (!as_given) return reduced_precision::in_float32<&gla_op>(call);
  }
  const Impl impl = impl_of(call.impl);
  Impl chosen = check_impl(impl, kGlaImpls, "gla", q.device());
  const at::Tensor qs = scaled(q, call.scale), offsets = or_undefined(call.cu_seqlens);
  // auto on a GPU takes the fused kernels (once they have passed there) only for inputs they read; else the chunked
  // form.
  using namespace gpu_kernels;
  const int64_t sequences = offsets.defined() ? offsets.numel() - 1 : q.size(0);
  if (impl == Impl::automatic && chosen == Impl::fused && !q.device().is_cpu() &&
      !(reads_dtype(q.scalar_type()) && reads_width(q.size(-1)) && reads_width(v.size(-1)) &&
        sequences * q.size(2) <= kMaxPrograms))
    chosen = Impl::chunked;
  // The read from a zero state, each window of positions by the chosen implementation (causal_outputs)...
  const auto r = causal_outputs(true, {k, v, log_decay}, qs, offsets, [&](const Window& w) {
    const auto qw = w.queries(qs, k), kw = w.keys(k), vw = w.keys(v), decay = w.keys(log_decay);
    const PriorRead read = chosen == Impl::fused     ? gla_fused(qw, kw, vw, decay, w.cu_seqlens)
                           : chosen == Impl::chunked ? gla_chunked(qw, kw, vw, decay, w.cu_seqlens)
                                                     : gla_naive(qw, kw, vw, decay, w.cu_seqlens);
    return std::vector<at::Tensor>{read.numerator, read.normaliser};
  });
  // ... then the initial state's share and the final state, in closed form (state.cpp).
  const ReadWithState continued =
      continue_packed_scan({r[0], r[1]}, qs, k, v, log_decay, {or_undefined(call.kv), or_undefined(call.k_sum)},
                           call.output_final_state, offsets);
  return {continued.read.numerator, continued.read.normaliser, continued.final_state.kv, continued.final_state.k_sum};
}

// Decode, functional: the state (the layout of linear attention's) goes in and the updated state comes out (nothing is
// modified). log_decay_t [B,H] (per head) or [B,H,dk] (per key feature).
GlaStepCall::Result gla_step_op(const GlaStepCall& call) {
  const at::Tensor &q_t = call.q_t, &k_t = call.k_t, &v_t = call.v_t, &log_decay_t = call.log_decay_t;
  const char* op = "gla_step";
  check_scan_step_args(op, q_t, k_t, v_t, call.kv, call.k_sum);
  check_state_features_are_keys(op, q_t, call.kv);
  TORCH_CHECK(log_decay_t.dim() == 2 || log_decay_t.dim() == 3, op,
              ": log_decay_t must be [B,H] (a decay per head) or [B,H,dk] (per key feature) (got ",
              log_decay_t.sizes(), ")");
  const bool per_key = log_decay_t.dim() == 3;
  TORCH_CHECK(log_decay_t.sizes() == (per_key ? q_t.sizes() : q_t.sizes().slice(0, 2)), op, ": log_decay_t must be ",
              per_key ? "[B,H,dk], q_t's shape" : "[B,H], q_t's first two sizes", " (got ", log_decay_t.sizes(),
              " and ", q_t.sizes(), ")");
  // The decay of each row of the state: [B,H,1] per head, [B,H,dk] per key.
  const auto decay = per_key ? log_decay_t.exp() : log_decay_t.exp().unsqueeze(-1);
  const auto kv = decay.unsqueeze(-1) * call.kv + k_t.unsqueeze(-1) * v_t.unsqueeze(-2);
  const auto k_sum = decay * call.k_sum + k_t;
  return {(q_t.unsqueeze(-1) * kv).sum(-2).unsqueeze(1), (q_t * k_sum).sum(-1).unsqueeze(1), kv, k_sum};
}

// The FEM read under the gated-linear-attention prior (decay exp(log_decay) per head or key feature and step,
// causal).
TensorPair fem_gla_read_op(const FemGlaReadCall& call) {
  TORCH_CHECK(call.v.dim() == 4, "fem_gla_read: v must be [B,T,H,dv] (got ", call.v.sizes(), ")");
  check_impl(impl_of(call.impl), kGlaImpls, "fem_gla_read", call.q.device());  // the error names this op
  check_fem_prior_read_impl("fem_gla_read", "gla", impl_of(call.impl), call.q.device());
  const FemRead r = fem_capped_read("fem_gla_read", call.v, call.beta, call.cap, [&](const at::Tensor& values) {
    const auto type = values.scalar_type();
    const auto [numerator, normaliser, kv, k_sum] =
        gla_op(GlaCall{.q = call.q.to(type), .k = call.k.to(type), .v = values, .log_decay = call.log_decay.to(type),
                       .impl = call.impl, .kv = c10::nullopt, .k_sum = c10::nullopt, .cu_seqlens = call.cu_seqlens});
    return normalised_read_op(NormalisedReadCall{numerator, normaliser, kPriorNormaliserFloor});
  });
  return {r.mean, r.free_energy};
}

// GLA's read with a gentle decay, log_decay = logsigmoid(randn) / 16 [B,T,H].
OpCase gla_read_case(Impl impl, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     std::vector<at::Tensor> leaves) {
  const auto log_decay = bench_inputs::leaf(at::log_sigmoid(at::randn({q.size(0), q.size(1), q.size(2)})) / 16);
  leaves.push_back(log_decay);
  return {[=] {
            const auto r = gla(q, k, v, log_decay, {.impl = impl});
            return std::vector<at::Tensor>{r.numerator, r.normaliser};
          },
          std::move(leaves)};
}

OpCase gla_case(Impl impl, const OpShape& s) {
  const auto q = bench_inputs::features({s.batch, s.length, s.heads, s.dk});
  const auto k = bench_inputs::features({s.batch, s.length, s.heads, s.dk});
  const auto v = bench_inputs::randn({s.batch, s.length, s.heads, s.dv});
  return gla_read_case(impl, q, k, v, {q, k, v});
}

// GLA with a decay per key feature, log_decay = logsigmoid(randn) / 16 [B,T,H,dk].
OpCase gla_per_key_case(Impl impl, const OpShape& s) {
  const auto q = bench_inputs::features({s.batch, s.length, s.heads, s.dk});
  const auto k = bench_inputs::features({s.batch, s.length, s.heads, s.dk});
  const auto v = bench_inputs::randn({s.batch, s.length, s.heads, s.dv});
  const auto log_decay = bench_inputs::leaf(at::log_sigmoid(at::randn({s.batch, s.length, s.heads, s.dk})) / 16);
  return {[=] {
            const auto r = gla(q, k, v, log_decay, {.impl = impl});
            return std::vector<at::Tensor>{r.numerator, r.normaliser};
          },
          {q, k, v, log_decay}};
}

// LRNN-decay: GLA with unit features q = k = 1 of width 1 (constants, not leaves); dk is not used.
OpCase lrnn_decay_case(Impl impl, const OpShape& s) {
  const auto ones = at::ones({s.batch, s.length, s.heads, 1});
  const auto v = bench_inputs::randn({s.batch, s.length, s.heads, s.dv});
  return gla_read_case(impl, ones, ones, v, {v});
}

OpFamily declare_gla() {
  const BenchCaseDeclaration scan{
      .name = "gla",
      .order = 40,
      .inputs = "as linear_attention, log_decay = logsigmoid(randn) / 16 [B,T,H]",
      .impls = kGlaImpls,
      .make = gla_case,
      .forward_flops = [](const OpShape& s) -> std::optional<double> {
        return 4.0 * s.batch * s.length * s.heads * s.dk * s.dv;  // the state path
      }};
  const BenchCaseDeclaration per_key{
      .name = "gla_per_key",
      .order = 45,
      .inputs = "as gla, log_decay = logsigmoid(randn) / 16 per key feature [B,T,H,dk]",
      .impls = kGlaImpls,
      .make = gla_per_key_case,
      .forward_flops = [](const OpShape& s) -> std::optional<double> {
        return 4.0 * s.batch * s.length * s.heads * s.dk * s.dv;  // the state path
      },
      .naive_shapes = {{1, 256, 4, 64, 64}}};  // the naive twin holds [B,H,T,T,dk]
  const BenchCaseDeclaration lrnn_decay{
      .name = "lrnn_decay",
      .order = 60,
      .inputs = "gla with unit features q = k = ones [B,T,H,1] (constants), v [B,T,H,dv], log_decay as gla "
                "(dk is not used)",
      .impls = kGlaImpls,
      .make = lrnn_decay_case};
  return {.name = "gla",
          .bench_cases = {scan, per_key, lrnn_decay},
          .bad_calls = gla_bad_calls};
}

}  // namespace

SEQMIX_OP_FAMILY(declare_gla);

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_op<&gla_op>(m, "gla(Tensor q, Tensor k, Tensor v, Tensor log_decay, str impl='auto', float? scale=None, "
                        "Tensor? kv=None, Tensor? k_sum=None, bool output_final_state=False, "
                        "Tensor? cu_seqlens=None) -> (Tensor numerator, Tensor normaliser, Tensor kv, Tensor k_sum)",
      R"doc(Gated linear attention's (numerator, normaliser): S_t = diag(exp(a_t)) S_{t-1} + k_t v_t^T, numerator
q_t S_t, normaliser q_t . z_t. q, k [B,T,H,dk], v [B,T,H,dv], log_decay a <= 0 per head [B,T,H] (chunked scan
when fused) or per key feature [B,T,H,dk] (the GLA paper's gates; recurrent scan when fused). scale,
initial_state (kv, k_sum) and output_final_state as in linear_attention. cu_seqlens (int64 [N+1]) packs N
sequences into [1, total_T, ...], each scanned from its own state (initial and final states [N, ...]).)doc", kGlaImpls,
      Precision::reduced_on_cuda);
  define_op<&gla_step_op>(m, "gla_step(Tensor q_t, Tensor k_t, Tensor v_t, Tensor log_decay_t, Tensor kv, "
                             "Tensor k_sum) -> (Tensor numerator, Tensor normaliser, Tensor kv, Tensor k_sum)",
      R"doc(One GLA step: q_t, k_t [B,H,dk], v_t [B,H,dv], log_decay_t [B,H] -> (numerator, normaliser, state).)doc");
  define_op<&fem_gla_read_op>(m, "fem_gla_read(Tensor q, Tensor k, Tensor v, Tensor log_decay, Tensor beta, "
                                 "float cap=40., str impl='auto', Tensor? cu_seqlens=None) "
                                 "-> (Tensor mean, Tensor free_energy)",
      R"doc(The FEM read under the gated-linear-attention prior (decay exp(log_decay) per head or key feature and
step, causal). q, k [B,T,H,dk], v [B,T,H,dv], log_decay [B,T,H] or [B,T,H,dk] <= 0, beta [H*dv] ->
(mean, free_energy) [B,T,H,dv]. cu_seqlens packs sequences as in gla.)doc", kGlaImpls);
}
