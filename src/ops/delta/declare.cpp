// The delta family in the op table and in torch.ops.seqmix: the delta rule (DeltaNet) in its parallel form and
// its decode step, on linear attention's state layout.
#include "../common/bench_inputs.h"
#include "../common/checks.h"
#include "../common/packing.h"
#include "../common/padding.h"
#include "../common/torch_op.h"
#include "seqmix/ops/delta.h"
#include "seqmix/ops/op_table.h"
#include "internal.h"

namespace seqmix::ops {

std::vector<BadCall> delta_bad_calls();

namespace {

// With a state (fla's initial_state / output_final_state): the read continued from kv, k_sum and the state after
// the last position.
ReadAndState delta_rule_op(const DeltaRuleCall& call) {
  const at::Tensor &q = call.q, &k = call.k, &v = call.v, &beta = call.beta;
  if (call.cu_seqlens.has_value()) {
    // Packed: each sequence alone, from its own row of the initial state ([N,H,dk,dv] and [N,H,dk]).
    check_cu_seqlens("delta_rule", *call.cu_seqlens, q.size(0), q.size(1));
    const auto row = [](const c10::optional<at::Tensor>& t, int64_t i) {
      return t.has_value() ? c10::optional<at::Tensor>(t->narrow(0, i, 1)) : t;
    };
    const auto joined = each_sequence_alone(
        "delta_rule", *call.cu_seqlens, q.size(1), {1, 1, 0, 0}, [&](int64_t begin, int64_t length, int64_t i) {
          const auto part = [&](const at::Tensor& x) { return x.narrow(1, begin, length); };
          const auto [numerator, normaliser, kv_i, k_sum_i] = delta_rule_op(DeltaRuleCall{
              .q = part(q),
              .k = part(k),
              .v = part(v),
              .beta = part(beta),
              .impl = call.impl,
              .scale = call.scale,
              .kv = row(call.kv, i),
              .k_sum = row(call.k_sum, i),
              .output_final_state = call.output_final_state,
              .cu_seqlens = c10::nullopt});
          return std::vector<at::Tensor>{numerator, normaliser, kv_i, k_sum_i};
        });
    return {joined[0], joined[1], joined[2], joined[3]};
  }
  return delta_rule_from_state(call);
}

// Decode, functional: the state (linear attention's layout: kv = S [B,H,dk,dv], k_sum = z [B,H,dk]) goes in and the
// updated state comes out (nothing is modified). q_t, k_t [B,H,dk], v_t [B,H,dv], beta_t [B,H] -> numerator
// [B,1,H,dv], normaliser [B,1,H].
DeltaRuleStepCall::Result delta_rule_step_op(const DeltaRuleStepCall& call) {
  const at::Tensor &q_t = call.q_t, &k_t = call.k_t, &v_t = call.v_t, &beta_t = call.beta_t;
  const char* op = "delta_rule_step";
  check_scan_step_args(op, q_t, k_t, v_t, call.kv, call.k_sum);
  check_state_features_are_keys(op, q_t, call.kv);
  TORCH_CHECK(beta_t.defined(), op, ": beta_t must be given, [B,H]");
  check_rank(beta_t, op, "beta_t", 2, "B,H");
  check_same_float_dtype(op, {q_t, k_t, v_t, beta_t, call.kv, call.k_sum});  // the state too: no silent promotion
  TORCH_CHECK(beta_t.sizes() == q_t.sizes().slice(0, 2), op, ": beta_t must share [B,H] with q_t (got ",
              beta_t.sizes(), " and ", q_t.sizes(), ")");
  const auto b = beta_t.unsqueeze(-1);                                // [B,H,1]
  // S <- S + b k (v - k^T S)^T: what the state already returns for k_t is corrected towards v_t.
  const auto recalled = (k_t.unsqueeze(-1) * call.kv).sum(-2);       // k^T S [B,H,dv]
  const auto kv = call.kv + (b * k_t).unsqueeze(-1) * (v_t - recalled).unsqueeze(-2);
  const auto recalled_one = (k_t * call.k_sum).sum(-1, /*keepdim=*/true);  // k . z [B,H,1]
  const auto k_sum = call.k_sum + b * k_t * (1 - recalled_one);
  return {(q_t.unsqueeze(-1) * kv).sum(-2).unsqueeze(1), (q_t * k_sum).sum(-1).unsqueeze(1), kv, k_sum};
}

// The layers' inputs: q and k L2-normalised per head [B,T,H,dk], v [B,T,H,dv], beta = sigmoid(randn) [B,T,H].
OpCase delta_rule_case(Impl impl, const OpShape& s) {
  const auto unit = [&] {
    const auto x = at::randn({s.batch, s.length, s.heads, s.dk});
    return bench_inputs::leaf(x / x.norm(2, {-1}, /*keepdim=*/true).clamp_min(1e-6));
  };
  const auto q = unit(), k = unit();
  const auto v = bench_inputs::randn({s.batch, s.length, s.heads, s.dv});
  const auto beta = bench_inputs::leaf(at::sigmoid(at::randn({s.batch, s.length, s.heads})));
  return {[=] {
            const auto r = delta_rule(q, k, v, beta, {.impl = impl});
            return std::vector<at::Tensor>{r.numerator, r.normaliser};
          },
          {q, k, v, beta}};
}

OpFamily declare_delta() {
  const BenchCaseDeclaration parallel{
      .name = "delta_rule",
      .order = 45,
      .inputs = "q, k L2-normalised randn [B,T,H,dk], v [B,T,H,dv], beta = sigmoid(randn) [B,T,H]",
      .impls = kDeltaRuleImpls,
      .make = delta_rule_case,
      .shapes = {{1, 256, 4, 64, 64}, {4, 1024, 8, 64, 64}}};
  return {.name = "delta",
          .bench_cases = {parallel},
          .bad_calls = delta_bad_calls};
}

}  // namespace

SEQMIX_OP_FAMILY(declare_delta);

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_op<&delta_rule_op>(m, "delta_rule(Tensor q, Tensor k, Tensor v, Tensor beta, str impl='auto', "
                               "float? scale=None, Tensor? kv=None, Tensor? k_sum=None, bool output_final_state=False, "
                               "Tensor? cu_seqlens=None) "
                               "-> (Tensor numerator, Tensor normaliser, Tensor kv, Tensor k_sum)",
      R"doc(The delta rule's (numerator, normaliser): S_t = (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T, numerator
S_t^T q_t, normaliser the same read of a value of ones. q, k [B,T,H,dk] (unit norm in the layers), v [B,T,H,dv],
beta [B,T,H] in (0, 1). Parallel form (one triangular solve); naive only. scale, initial_state (kv, k_sum) and
output_final_state as in linear_attention; cu_seqlens packs sequences (one state per sequence, each run alone:
eager only).)doc", kDeltaRuleImpls);
  define_op<&delta_rule_step_op>(m, "delta_rule_step(Tensor q_t, Tensor k_t, Tensor v_t, Tensor beta_t, Tensor kv, "
                                    "Tensor k_sum) -> (Tensor numerator, Tensor normaliser, Tensor kv, Tensor k_sum)",
      R"doc(One delta-rule step on linear attention's state (linear_attention_initial_state): q_t, k_t [B,H,dk],
v_t [B,H,dv], beta_t [B,H] -> (numerator, normaliser, state).)doc");
}
