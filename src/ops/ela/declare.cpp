// The ela family in the op table and in torch.ops.seqmix: Exact Linear Attention (the linear form, or the
// explicit quadratic form as its naive twin, with state handoff), its decode step and state.
#include "../common/bench_inputs.h"
#include "../common/checks.h"
#include "../common/packing.h"
#include "../common/padding.h"
#include "../common/torch_op.h"
#include "internal.h"
#include "seqmix/ops/ela.h"
#include "seqmix/ops/op_table.h"

namespace seqmix::ops {

std::vector<BadCall> ela_bad_calls();

namespace {

// key_max as the decode ops pass it: empty ([0]) for the kernels without one (all but hadamard_exp).
at::Tensor empty_as_undefined(const at::Tensor& key_max) {
  return key_max.sym_numel() == 0 ? at::Tensor() : key_max;  // symbolic under torch.compile
}
at::Tensor undefined_as_empty(const at::Tensor& key_max, const at::Tensor& like) {
  return key_max.defined() ? key_max : at::empty({0}, like.options());
}

// With a state (fla's scale, initial_state and output_final_state), causal only: y continued from the state,
// and the state after the last position (undefined unless asked for; key_max empty for polynomial kernels).
ElaCall::Result ela_op(const ElaCall& call) {
  const at::Tensor &q = call.q, &k = call.k, &v = call.v;
  if (call.cu_seqlens.has_value()) {
    // Packed: each sequence alone, from its own row of the initial state ([N,...] each; key_max stays [0] for the
    // kernels without one).
    check_cu_seqlens("ela", *call.cu_seqlens, q.size(0), q.size(1));
    const auto row = [](const c10::optional<at::Tensor>& t, int64_t i) {
      return t.has_value() && t->numel() > 0 ? c10::optional<at::Tensor>(t->narrow(0, i, 1)) : t;
    };
    const auto joined = each_sequence_alone(
        "ela", *call.cu_seqlens, q.size(1), {1, 0, 0, 0}, [&](int64_t begin, int64_t length, int64_t i) {
          const auto part = [&](const at::Tensor& x) { return x.narrow(1, begin, length); };
          const auto [y, kv_i, k_sum_i, key_max_i] =
              ela_op(ElaCall{.q = part(q), .k = part(k), .v = part(v), .kernel = call.kernel, .causal = call.causal,
                             .eps = call.eps, .impl = call.impl, .scale = call.scale, .kv = row(call.kv, i),
                             .k_sum = row(call.k_sum, i), .key_max = row(call.key_max, i),
                             .output_final_state = call.output_final_state, .cu_seqlens = c10::nullopt});
          return std::vector<at::Tensor>{y, kv_i, k_sum_i, key_max_i};
        });
    return {joined[0], joined[1], joined[2], joined[3]};
  }
  const ExactKernel& kernel = exact_kernel(std::string(call.kernel));
  const at::Tensor qs = scaled(q, call.scale);
  // The chosen form through causal_outputs.
  const bool fused = check_impl(impl_of(call.impl), kElaImpls, "ela", qs.device()) == Impl::fused;
  const at::Tensor y = causal_outputs(call.causal, {k, v}, qs, {}, [&](const Window& w) {
    const auto qw = w.queries(qs, k), kw = w.keys(k), vw = w.keys(v);
    return std::vector<at::Tensor>{fused ? ela_fused(qw, kw, vw, kernel, call.causal, call.eps)
                                         : ela_naive(qw, kw, vw, kernel, call.causal, call.eps)};
  })[0];
  const bool with_state =
      call.kv.has_value() || call.k_sum.has_value() || call.key_max.has_value() || call.output_final_state;
  if (!with_state) return {y, at::Tensor(), at::Tensor(), at::Tensor()};
  TORCH_CHECK(call.causal, "ela: a state (kv, k_sum, key_max, output_final_state) needs causal=True");
  const ElaState initial{or_undefined(call.kv), or_undefined(call.k_sum),
                         call.key_max.has_value() ? empty_as_undefined(*call.key_max) : at::Tensor()};
  const ElaReadWithState r = continue_ela_scan(y, qs, k, v, kernel, call.eps, initial, call.output_final_state);
  if (!call.output_final_state) return {r.y, at::Tensor(), at::Tensor(), at::Tensor()};
  // Outputs must not alias an input (a zero-length call hands the initial state back).
  return {r.y, r.final_state.kv.clone(), r.final_state.k_sum.clone(),
          undefined_as_empty(r.final_state.key_max, q).clone()};
}

// Decode, functional: one token of causal ELA with the fixed-size state (y_t and the state after it); key_max is
// empty ([0]) for kernels without one (all but hadamard_exp), in and out. Hadamard Exp keeps the state relative to
// the running max of each key channel, as the fused scan does.
ElaStepCall::Result ela_step_op(const ElaStepCall& call) {
  const char* op = "ela_step";
  const at::Tensor &q_t = call.q_t, &k_t = call.k_t, &v_t = call.v_t;
  ElaState state{call.kv, call.k_sum, empty_as_undefined(call.key_max)};
  const ExactKernel& kernel = exact_kernel(std::string(call.kernel));
  check_scan_step_args(op, q_t, k_t, v_t, state.kv, state.k_sum);
  check_eps(op, call.eps);
  at::Tensor y;
  if (kernel.exponential) {
    check_state_dtype(op, q_t, {state.key_max});
    TORCH_CHECK(state.key_max.defined(), op, ": kernel '", kernel.name,
                "' needs the state's key_max (was the state built by ela_initial_state for another kernel?)");
    TORCH_CHECK(state.key_max.sizes() == q_t.sizes() && state.kv.size(2) == q_t.size(2), op,
                ": kernel '", kernel.name, "' needs state.kv [B,H,dk,dv] and state.key_max [B,H,dk] with dk = ",
                q_t.size(2), " (got ", state.kv.sizes(), " and ", state.key_max.sizes(), ")");
    auto r = at::maximum(state.key_max, k_t);             // [B,H,dk]
    auto rescale = at::exp(state.key_max - r);
    auto w = at::exp(k_t - r);
    state.kv = state.kv * rescale.unsqueeze(-1) + w.unsqueeze(-1) * v_t.unsqueeze(-2);
    state.k_sum = state.k_sum * rescale + w;
    state.key_max = r;
    auto shifted = q_t + r;
    auto phi = at::exp(shifted - std::get<0>(shifted.max(-1, true)));
    auto numerator = (phi.unsqueeze(-1) * state.kv).sum(-2);
    y = numerator / (phi * state.k_sum).sum(-1, true);
  } else {
    auto phi = kernel.query_features(q_t), psi = kernel.key_features(k_t);
    TORCH_CHECK(phi.size(-1) == state.kv.size(2) && psi.size(-1) == state.kv.size(2), op, ": kernel '", kernel.name,
                "' makes ", phi.size(-1), " features but the state holds ", state.kv.size(2),
                " (was the state built by ela_initial_state for another kernel?)");
    state.kv = state.kv + psi.unsqueeze(-1) * v_t.unsqueeze(-2);
    state.k_sum = state.k_sum + psi;
    auto normaliser = (phi * state.k_sum).sum(-1, true);
    check_row_sums(kernel, normaliser);
    y = (phi.unsqueeze(-1) * state.kv).sum(-2) / normaliser.clamp_min(call.eps);
  }
  return {y, state.kv, state.k_sum, undefined_as_empty(state.key_max, call.kv)};
}

// Causal, q k v ~ N(0, 1): Hadamard Exp runs the fused running-max scan, the squared-Euclidean kernel linear
// attention's chunked scan on its dk+2 features.
OpCase ela_case(const std::string& kernel_name, Impl impl, const OpShape& s) {
  const auto q = bench_inputs::randn({s.batch, s.length, s.heads, s.dk});
  const auto k = bench_inputs::randn({s.batch, s.length, s.heads, s.dk});
  const auto v = bench_inputs::randn({s.batch, s.length, s.heads, s.dv});
  const ExactKernel& kernel = exact_kernel(kernel_name);
  return {[=, &kernel] {
            return std::vector<at::Tensor>{
                ela(q, k, v, {.kernel = kernel.name, .causal = true, .eps = 1e-8, .impl = impl}).y};
          },
          {q, k, v}};
}

OpFamily declare_ela() {
  const std::vector<OpShape> shapes = {{1, 256, 4, 64, 64}, {1, 4096, 8, 64, 64}}, naive_shapes = {{1, 256, 4, 64, 64}};
  const BenchCaseDeclaration hadamard{
      .name = "ela",
      .order = 80,
      .inputs = "q, k [B,T,H,dk], v [B,T,H,dv] (randn, unscaled), kernel hadamard_exp",
      .impls = kElaImpls,
      .make = [](Impl impl, const OpShape& s) { return ela_case("hadamard_exp", impl, s); },
      .forward_flops = [](const OpShape& s) -> std::optional<double> {
        return 4.0 * s.batch * s.length * s.heads * s.dk * s.dv;
      },
      .shapes = shapes,
      .naive_shapes = naive_shapes};
  const BenchCaseDeclaration sum_sq{
      .name = "ela_sum_sq",
      .order = 90,
      .inputs = "as ela, kernel sum_sq_euclidean",
      .impls = kElaImpls,
      .make = [](Impl impl, const OpShape& s) { return ela_case("sum_sq_euclidean", impl, s); },
      .forward_flops = [](const OpShape& s) -> std::optional<double> {
        return 4.0 * s.batch * s.length * s.heads * (s.dk + 2.0) * s.dv;  // dk + 2 features
      },
      .shapes = shapes,
      .naive_shapes = naive_shapes};
  return {.name = "ela",
          .bench_cases = {hadamard, sum_sq},
          .bad_calls = ela_bad_calls};
}

}  // namespace

SEQMIX_OP_FAMILY(declare_ela);

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_op<&ela_op>(m, "ela(Tensor q, Tensor k, Tensor v, str kernel='hadamard_exp', bool causal=True, "
                        "float eps=1e-8, str impl='auto', float? scale=None, Tensor? kv=None, Tensor? k_sum=None, "
                        "Tensor? key_max=None, bool output_final_state=False, Tensor? cu_seqlens=None) "
                        "-> (Tensor y, Tensor kv, Tensor k_sum, Tensor key_max)",
      R"doc(Exact Linear Attention: sum_j K(q_t, k_j) v_j / sum_j K(q_t, k_j) in O(T) through the kernel's exact
features. kernel: hadamard_exp (sum_d exp(q_d + k_d)), sum_sq_euclidean (||q+k||^2), sub_sq_euclidean
(||q-k||^2), direction_magnitude. q, k [B,T,H,dk], v [B,T,H,dv] -> [B,T,H,dv].

scale multiplies q. Causal only: initial_state (kv, k_sum, key_max) as ela_initial_state / ela_step keep it
(key_max empty for the polynomial kernels) continues from earlier positions; output_final_state=True returns
(y, state). cu_seqlens packs sequences (one state per sequence, [N,...]; each run alone: eager only).)doc", kElaImpls);
  define_op<&ela_step_op>(m, "ela_step(Tensor q_t, Tensor k_t, Tensor v_t, Tensor kv, Tensor k_sum, Tensor key_max, "
                             "str kernel='hadamard_exp', float eps=1e-8) -> (Tensor y, Tensor kv, Tensor k_sum, "
                             "Tensor key_max)",
      R"doc(One causal ELA step: q_t, k_t [B,H,dk], v_t [B,H,dv] -> (y_t [B,H,dv], state).)doc");
  define_op_without_tensors<&ela_initial_state_op>(
      m, "ela_initial_state(int batch, int heads, int dk, int dv, str kernel='hadamard_exp', ScalarType? dtype=None, "
         "Device? device=None) -> (Tensor kv, Tensor k_sum, Tensor key_max)",
      R"doc(Empty ELA state (kv [B,H,F,dv], k_sum [B,H,F], key_max [B,H,dk] for hadamard_exp, else empty [0]),
F the kernel's feature width: nothing grows with the sequence.)doc");
}
