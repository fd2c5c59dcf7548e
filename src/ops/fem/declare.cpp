// The fem family in the op table and in torch.ops.seqmix: the softmax prior's free-energy read (fused or naive)
// and the value clamp and restore every FEM read uses. (The reads through the linear priors, fem_<prior>_read,
// live with their priors and share fem_capped_read.)
#include <ATen/ExpandUtils.h>

#include "../common/bench_inputs.h"
#include "../common/checks.h"
#include "../common/packing.h"
#include "../common/padding.h"
#include "../common/torch_op.h"
#include "seqmix/ops/attention.h"
#include "../common/gpu_kernels.h"
#include "internal.h"
#include "seqmix/ops/fem.h"
#include "seqmix/ops/op_table.h"

namespace seqmix::ops {

std::vector<BadCall> fem_bad_calls();

namespace {

TensorPair fem_softmax_read_op(const FemSoftmaxReadCall& call) {
  const at::Tensor &q = call.q, &k = call.k, &v = call.v, &beta = call.beta;
  const double cap = call.cap;
  const double scale = call.scale.has_value() ? *call.scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const bool causal = call.causal;
  if (call.cu_seqlens.has_value()) {
    // Packed: each sequence read alone (the fused kernel's per-channel shift is a max over a query block's keys,
    // which would span sequences), joined along time.
    check_packed_attention("fem_softmax_read", q, k, or_undefined(call.key_mask), *call.cu_seqlens);
    const auto joined = each_sequence_alone(
        "fem_softmax_read", *call.cu_seqlens, q.size(1), {1, 1}, [&](int64_t begin, int64_t length, int64_t) {
          const auto part = [&](const at::Tensor& x) { return x.narrow(1, begin, length); };
          const auto [mean, free_energy] = fem_softmax_read_op(FemSoftmaxReadCall{.q = part(q),
                                                                                  .k = part(k),
                                                                                  .v = part(v),
                                                                                  .beta = beta,
                                                                                  .cap = cap,
                                                                                  .causal = causal,
                                                                                  .scale = scale,
                                                                                  .key_mask = c10::nullopt,
                                                                                  .impl = call.impl,
                                                                                  .cu_seqlens = c10::nullopt});
          return std::vector<at::Tensor>{mean, free_energy};
        });
    return {joined[0], joined[1]};
  }
  const at::Tensor key_mask = or_undefined(call.key_mask);
  const Impl impl = impl_of(call.impl);
  Impl chosen = check_impl(impl, kFemSoftmaxReadImpls, "fem_softmax_read", q.device());
  // auto on a GPU takes the fused kernels (once they have passed there) only for inputs they read; else SDPA.
  using namespace gpu_kernels;
  if (impl == Impl::automatic && chosen == Impl::fused && !q.device().is_cpu() &&
      !(reads_dtype(q.scalar_type()) && reads_width(q.size(-1)) && reads_width(v.size(-1)) && q.size(1) <= k.size(1) &&
        q.size(0) * q.size(2) <= kMaxPrograms && cap > 0 && cap <= kFemFusedMaxCap))
    chosen = cap > 0 ? Impl::torch : Impl::naive;
  // The operator takes bfloat16/float16 CUDA tensors as they are (Precision::reduced_on_cuda): the CUDA kernel reads
  // them when all four share that dtype; everything else reads in float32, as every operator does.
  std::optional<at::ScalarType> reduced;  // the first reduced-precision input's dtype, which the outputs take
  for (const at::Tensor* t : {&q, &k, &v, &beta})
    if (!reduced) reduced = reduced_precision::reduced_dtype(*t);
  const bool one_dtype = k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() &&
                         beta.scalar_type() == q.scalar_type();
  if (reduced && !(chosen == Impl::fused && one_dtype)) {
    using reduced_precision::widened;
    const std::string chosen_name = impl_name(chosen);
    const auto [mean, free_energy] = fem_softmax_read_op(FemSoftmaxReadCall{.q = widened(q),
                                                                            .k = widened(k),
                                                                            .v = widened(v),
                                                                            .beta = widened(beta),
                                                                            .cap = cap,
                                                                            .causal = causal,
                                                                            .scale = scale,
                                                                            .key_mask = call.key_mask,
                                                                            .impl = chosen_name,
                                                                            .cu_seqlens = c10::nullopt});
    return {mean.to(*reduced), free_energy.to(*reduced)};
  }
  TORCH_CHECK(chosen != Impl::torch || cap > 0, "fem_softmax_read: impl=torch reads with the constant shift cap, so "
              "it needs cap > 0 (got ", cap, "); impl=naive reads any cap");
  // impl=torch: padded keys made finite first (the other reads do it inside), so that causal_outputs, which reads
  // rows in parts around a non-finite key, sees no poison where the mask already hides it.
  const AttentionInputs in = chosen == Impl::torch ? finite_masked_positions("fem_softmax_read", q, k, v, key_mask)
                                                   : AttentionInputs{q, k, v};
  const auto r = causal_outputs(causal, {in.k, in.v}, in.q, {}, [&](const Window& w) {
    const auto qw = w.queries(in.q, in.k), kw = w.keys(in.k), vw = w.keys(in.v), mask = w.keys(key_mask);
    FemRead read;
    switch (chosen) {
      case Impl::fused: read = fem_softmax_read_fused(qw, kw, vw, beta, cap, causal, scale, mask); break;
      case Impl::torch:
        // One SDPA call over both value streams.
        read = fem_capped_read("fem_softmax_read", vw, beta, cap,
                               [&](const at::Tensor& values) {
                                 return softmax_attention_torch(qw, kw, values, causal, scale,
                                                                mask, {});
                               }, qw.scalar_type());
        break;
      default: read = fem_softmax_read_naive(qw, kw, vw, beta, cap, causal, scale, mask);
    }
    return std::vector<at::Tensor>{read.mean, read.free_energy};
  });
  return {r[0], r[1]};
}

// L / beta with L = log(z) + shift: z [...,C] the read of exp(u - shift), shift broadcastable.
at::Tensor fem_restore_op(const FemRestoreCall& call) {
  const at::Tensor &z = call.z, &shift = call.shift, &beta = call.beta;
  const char* op = "fem_restore";
  TORCH_CHECK(z.defined() && z.dim() >= 1, op, ": z must have a channel axis [...,C] (got ",
              z.defined() ? "a scalar" : "none", ")");
  TORCH_CHECK(beta.defined(), op, ": beta is missing (expected one entry per channel)");
  TORCH_SYM_CHECK(beta.sym_numel().sym_eq(z.sym_size(-1)), op, ": beta must have one entry per channel (got ",
                  beta.sym_numel(), " for ", z.sym_size(-1), " channels)");
  TORCH_CHECK(shift.defined() && at::is_expandable_to(shift.sym_sizes(), z.sym_sizes()), op,
              ": shift must broadcast to z ", z.sym_sizes(), " (got ", shift.defined() ? shift.sym_sizes() : c10::SymIntArrayRef{},
              ")");
  check_positive(op, "beta", beta);
  return (z.log() + shift) / beta.reshape_symint({z.sym_size(-1)});
}

// The read of causal softmax attention's inputs, beta = softplus(randn) + 0.5 [H*dv], cap 40.
OpCase fem_softmax_read_case(Impl impl, const OpShape& s) {
  using bench_inputs::randn;
  const auto q = randn({s.batch, s.length, s.heads, s.dk});
  const auto k = randn({s.batch, s.length, s.heads, s.dk});
  const auto v = randn({s.batch, s.length, s.heads, s.dv});
  const auto beta = bench_inputs::leaf(at::softplus(at::randn({s.heads * s.dv})) + 0.5);
  const double cap = 40, scale = 1.0 / std::sqrt(static_cast<double>(s.dk));
  return {[=] {
            const auto r = fem_softmax_read(q, k, v, beta, {.cap = cap, .causal = true, .scale = scale, .impl = impl});
            return std::vector<at::Tensor>{r.mean, r.free_energy};
          },
          {q, k, v, beta}};
}

OpFamily declare_fem() {
  const BenchCaseDeclaration read{
      .name = "fem_softmax_read",
      .order = 20,
      .inputs = "as attention, beta [H*dv] = softplus(randn) + 0.5, cap 40",
      .impls = kFemSoftmaxReadImpls,
      .make = fem_softmax_read_case,
      .forward_flops = [](const OpShape& s) -> std::optional<double> {
        const double pairs = s.length * (s.length + 1.0) / 2;  // causal; the [v, e] read is 2 dv wide
        return 2.0 * s.batch * s.heads * pairs * (s.dk + 2.0 * s.dv);
      },
      .naive_shapes = {{1, 256, 4, 64, 64}}};
  return {.name = "fem",
          .bench_cases = {read},
          .bad_calls = fem_bad_calls};
}

}  // namespace

SEQMIX_OP_FAMILY(declare_fem);

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_op<&fem_softmax_read_op>(m, "fem_softmax_read(Tensor q, Tensor k, Tensor v, Tensor beta, float cap=40., "
                                     "bool causal=True, float? scale=None, Tensor? key_mask=None, str impl='auto', "
                                     "Tensor? cu_seqlens=None) "
                                     "-> (Tensor mean, Tensor free_energy)",
      R"doc(The Free Energy Mixer's read under the softmax prior p = softmax(scale q k^T): (mean, free_energy).

mean = E_p[clip(v)], free_energy = (1/beta) log E_p[exp(beta clip(v))] per channel, clip to |beta v| <= cap.
q [B,T,H,dk], k [B,S,H,dk], v [B,S,H,dv], beta [H*dv] or [H,dv] > 0 -> two [B,T,H,dv]. The fused kernel
takes cap <= 40 in float32 (any cap in (0, 43] in float64); impl="torch" (auto's choice on a GPU) is one
scaled_dot_product_attention call over [clip(v), exp(beta clip(v) - cap)], as the FEM authors' layer reads.
On CUDA, impl="fused" is seqmix's tensor-core kernel: bfloat16 or float16 inputs, cap <= 40, head widths
(dk, dv) of 32, 64 or 128 (src/ops/fem/README.md). cu_seqlens packs sequences (each read alone, once
per sequence: eager only).)doc", kFemSoftmaxReadImpls,
      Precision::reduced_on_cuda);
  define_op<&fem_scale_values_op>(m, "fem_scale_values(Tensor v, Tensor beta, float cap) -> (Tensor clipped, Tensor scaled)",
      R"doc((clipped, scaled): v clamped to |beta v| <= cap (cap 0: no clamp) and beta times it. v [...,C], beta [C].)doc");
  define_op<&fem_restore_op>(m, "fem_restore(Tensor z, Tensor shift, Tensor beta) -> Tensor",
      R"doc((log z + shift) / beta: the free energy from a read z of exp(beta v - shift). z [...,C], beta [C].)doc");
}
