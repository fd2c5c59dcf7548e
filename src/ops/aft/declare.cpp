// The aft family in the op table and in torch.ops.seqmix: the AFT / LRNN-softmax read with the causal running
// max (fused scan or naive, with state handoff), its decode step and state, and the FEM read through it.
#include "../common/bench_inputs.h"
#include "../common/checks.h"
#include "../common/internal.h"
#include "../common/padding.h"
#include "../common/torch_op.h"
#include "seqmix/ops/aft.h"
#include "seqmix/ops/fem.h"
#include "seqmix/ops/op_table.h"
#include "internal.h"

namespace seqmix::ops {

std::vector<BadCall> aft_bad_calls();

namespace {

// With a state (fla's initial_state / output_final_state): the read continued from the state, and the state
// after the last position (packed: one state per sequence). Outputs must not alias each other or an input, so the
// final state is copied.
AftCall::Result aft_op(const AftCall& call) {
  const at::Tensor m = or_undefined(call.mask), offsets = or_undefined(call.cu_seqlens);
  const AftState initial{or_undefined(call.state_numerator), or_undefined(call.state_normaliser),
                         or_undefined(call.key_max)};
  const PriorRead zero_state = check_impl(impl_of(call.impl), kAftImpls, "aft", call.k.device()) == Impl::fused
                                    ? aft_fused(call.k, call.v, m, offsets)
                                    : aft_naive(call.k, call.v, m, offsets);
  const AftReadWithState r = continue_aft_scan(zero_state, call.k, m, initial, call.output_final_state, offsets);
  const auto copy = [](const at::Tensor& t) { return t.defined() ? t.clone() : t; };
  return {r.read.numerator, r.read.normaliser, copy(r.final_state.numerator), copy(r.final_state.normaliser),
          copy(r.final_state.key_max)};
}

// The FEM read under the AFT / LRNN-softmax prior w_ti = exp(k_i), i <= t, per channel.
TensorPair fem_aft_read_op(const FemAftReadCall& call) {
  const at::Tensor &k = call.k, &v = call.v;
  TORCH_CHECK(v.dim() == 3 && k.sizes() == v.sizes(), "fem_aft_read: k and v must both be [B,T,C] (got ", k.sizes(),
              " and ", v.sizes(), ")");
  check_impl(impl_of(call.impl), kAftImpls, "fem_aft_read", k.device());  // the error names this op
  const at::Tensor m = or_undefined(call.mask);
  if (m.defined()) check_aft_args("fem_aft_read", k, v, m);
  // Padding made finite before the value scaling too, whose exp would turn a NaN there into a NaN gradient.
  const at::Tensor key = finite_padding("fem_aft_read", "k", k, m), value = finite_padding("fem_aft_read", "v", v, m);
  const FemRead r = fem_capped_read("fem_aft_read", value, call.beta, call.cap, [&](const at::Tensor& values) {
    const auto keys = at::cat({key, key}, -1).to(values.scalar_type());  // each channel's key logit, both streams
    const auto [numerator, normaliser, state_numerator, state_normaliser, key_max] =
        aft_op(AftCall{.k = keys, .v = values, .mask = call.mask, .impl = call.impl, .state_numerator = c10::nullopt,
                       .state_normaliser = c10::nullopt, .key_max = c10::nullopt, .cu_seqlens = call.cu_seqlens});
    return normalised_read_op(NormalisedReadCall{numerator, normaliser, kPriorNormaliserFloor});
  });
  return {r.mean, r.free_energy};
}

// Per-channel keys and values [B,T,C], C = H*dv; dk is not used.
OpCase aft_case(Impl impl, const OpShape& s) {
  const auto k = bench_inputs::randn({s.batch, s.length, s.heads * s.dv});
  const auto v = bench_inputs::randn({s.batch, s.length, s.heads * s.dv});
  return {[=] {
            const auto r = aft(k, v, {.impl = impl});
            return std::vector<at::Tensor>{r.numerator, r.normaliser};
          },
          {k, v}};
}

OpFamily declare_aft() {
  const BenchCaseDeclaration scan{.name = "aft",
                                  .order = 50,
                                  .inputs = "k, v [B,T,C], C = H*dv (dk is not used)",
                                  .impls = kAftImpls,
                                  .make = aft_case};
  return {.name = "aft",
          .bench_cases = {scan},
          .bad_calls = aft_bad_calls};
}

}  // namespace

SEQMIX_OP_FAMILY(declare_aft);

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_op<&aft_op>(m, "aft(Tensor k, Tensor v, Tensor? mask=None, str impl='auto', Tensor? state_numerator=None, "
                        "Tensor? state_normaliser=None, Tensor? key_max=None, bool output_final_state=False, "
                        "Tensor? cu_seqlens=None) "
                        "-> (Tensor numerator, Tensor normaliser, Tensor state_numerator, Tensor state_normaliser, "
                        "Tensor key_max)",
      R"doc(AFT's (numerator, normaliser) per channel: sum_{i<=t} exp(k_i - m_t) v_i and sum_{i<=t} exp(k_i - m_t),
m_t the causal running max. k, v [B,T,C], mask [B,T] bool -> two [B,T,C].

initial_state (state_numerator, state_normaliser, key_max), each [B,C] as aft_initial_state / aft_step keep
them, continues from earlier positions; output_final_state=True also returns the state after the last
position, (numerator, normaliser, state). cu_seqlens (int64 [N+1]) packs N sequences into [1, total_T, C],
each read from a fresh state (or its own row of initial_state, [N,C] each).)doc", kAftImpls);
  define_op<&aft_step_op>(m, "aft_step(Tensor k_t, Tensor v_t, Tensor state_numerator, Tensor state_normaliser, "
                             "Tensor key_max, "
                             "Tensor? mask_t=None) -> (Tensor numerator, Tensor normaliser, Tensor state_numerator, "
                             "Tensor state_normaliser, Tensor key_max)",
      R"doc(One AFT step: k_t, v_t [B,C], mask_t [B] bool -> (numerator [B,1,C], normaliser [B,1,C], state).)doc");
  define_op_without_tensors<&aft_initial_state_op>(m, "aft_initial_state(int batch, int channels, ScalarType? dtype=None, "
                                                      "Device? device=None) "
                                                      "-> (Tensor state_numerator, Tensor state_normaliser, "
                                                      "Tensor key_max)",
      R"doc(Empty AFT state: running numerator, normaliser [B,C] and key maximum [B,C] (-1e30).)doc");
  define_op<&fem_aft_read_op>(m, "fem_aft_read(Tensor k, Tensor v, Tensor beta, float cap=40., Tensor? mask=None, "
                                 "str impl='auto', Tensor? cu_seqlens=None) -> (Tensor mean, Tensor free_energy)",
      R"doc(The FEM read under the AFT / LRNN-softmax prior w_ti = exp(k_i), i <= t, per channel.
k, v [B,T,C], beta [C], mask [B,T] bool (True = real token) -> (mean, free_energy) [B,T,C]. cu_seqlens packs
sequences as in aft.)doc", kAftImpls);
}
