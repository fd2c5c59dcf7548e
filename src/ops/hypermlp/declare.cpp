// The hypermlp family in the op table and in torch.ops.seqmix: HyperMLP's DPLR attention read, blocked (the
// fast form) or dense (its naive twin, O(T^3)).
#include "../common/packing.h"
#include "../common/padding.h"
#include "../common/torch_op.h"
#include "seqmix/ops/hypermlp.h"
#include "seqmix/ops/op_table.h"

namespace seqmix::ops {

std::vector<BadCall> hypermlp_bad_calls();

namespace {

HyperMixing mixing(const c10::optional<at::Tensor>& diag, const c10::optional<at::Tensor>& U,
                   const c10::optional<at::Tensor>& Vt, const char* side) {
  const int given = diag.has_value() + U.has_value() + Vt.has_value();
  TORCH_CHECK(given == 0 || given == 3, "hypermlp_read: the mixing ", side,
              " needs all of diag, U and Vt, or none of them (got ", given, ")");
  return given == 0 ? HyperMixing{} : HyperMixing{*diag, *U, *Vt};
}

at::Tensor hypermlp_read_op(const HypermlpReadCall& call) {
  const at::Tensor &q = call.q, &k = call.k, &v = call.v;
  const c10::string_view activation = call.activation, layout = call.layout;
  HyperReadOptions options;
  if (activation == "relu")
    options.activation = HyperActivation::relu;
  else if (activation == "glu")
    options.activation = HyperActivation::glu;
  else if (activation == "softmax")
    options.activation = HyperActivation::softmax;
  else
    TORCH_CHECK(false, "hypermlp_read: unknown activation '", activation, "' (expected relu, glu or softmax)");
  if (layout == "lag")
    options.layout = HyperLayout::lag;
  else if (layout == "forward")
    options.layout = HyperLayout::forward;
  else
    TORCH_CHECK(false, "hypermlp_read: unknown layout '", layout, "' (expected lag or forward)");
  options.eps = call.eps;
  options.scale = call.scale;
  options.block = call.block;
  const HyperMixing before = mixing(call.diag1, call.U1, call.Vt1, "before the activation");
  const HyperMixing after = mixing(call.diag2, call.U2, call.Vt2, "after the activation");
  TORCH_CHECK(before.defined() == call.s1.has_value(), "hypermlp_read: s1 and the mixing before go together");
  TORCH_CHECK(after.defined() == call.s2.has_value(), "hypermlp_read: s2 and the mixing after go together");
  const at::Tensor s1 = or_undefined(call.s1), s2 = or_undefined(call.s2);
  // The chosen read through causal_outputs, of positions [begin, begin + length) of q, k, v, s1 and s2 when packed
  // (one sequence), of all of them otherwise.
  const auto read = [&](int64_t begin, int64_t length) {
    const auto part = [&](const at::Tensor& x) {
      return call.cu_seqlens && x.defined() ? x.narrow(1, begin, length) : x;
    };
    const at::Tensor qp = part(q), kp = part(k), vp = part(v), s1p = part(s1), s2p = part(s2);
    const bool fused = check_impl(impl_of(call.impl), kHypermlpReadImpls, "hypermlp_read", qp.device()) == Impl::fused;
    return causal_outputs(true, {kp, vp}, qp, {}, [&](const Window& w) {
      // s1, s2 [B,T,...] belong to the queries.
      const auto qw = w.queries(qp, kp), kw = w.keys(kp), vw = w.keys(vp), s1w = w.queries(s1p, kp),
                 s2w = w.queries(s2p, kp);
      return std::vector<at::Tensor>{fused ? hypermlp_read_blocked(qw, kw, vw, s1w, before, s2w, after, options)
                                           : hypermlp_read_dense(qw, kw, vw, s1w, before, s2w, after, options)};
    })[0];
  };
  if (!call.cu_seqlens.has_value()) return read(0, q.size(1));
  // Packed: each sequence read alone (its lags and, in the forward layout, its positions start at its first token),
  // the mixing parameters shared; joined along time.
  const at::Tensor& cu_seqlens = *call.cu_seqlens;
  check_packed_attention("hypermlp_read", q, k, at::Tensor(), cu_seqlens);
  return each_sequence_alone("hypermlp_read", cu_seqlens, q.size(1), {1}, [&](int64_t begin, int64_t length, int64_t) {
    return std::vector<at::Tensor>{read(begin, length)};
  })[0];
}

OpFamily declare_hypermlp() {
  return {.name = "hypermlp", .bad_calls = hypermlp_bad_calls};
}

// The operator's spelling of the read's options.
const char* activation_name(HyperActivation a) {
  switch (a) {
    case HyperActivation::relu: return "relu";
    case HyperActivation::glu: return "glu";
    case HyperActivation::softmax: return "softmax";
  }
  return "";
}
const char* layout_name(HyperLayout l) { return l == HyperLayout::lag ? "lag" : "forward"; }
at::Tensor part_of(const HyperMixing& m, at::Tensor HyperMixing::*part) { return m.defined() ? m.*part : at::Tensor(); }

}  // namespace

HypermlpReadArgs hypermlp_read_args(const at::Tensor& s1, const HyperMixing& mix1, const at::Tensor& s2,
                                    const HyperMixing& mix2, const HyperReadOptions& options, Impl impl) {
  return {.s1 = s1,
          .diag1 = part_of(mix1, &HyperMixing::diag),
          .U1 = part_of(mix1, &HyperMixing::U),
          .Vt1 = part_of(mix1, &HyperMixing::Vt),
          .s2 = s2,
          .diag2 = part_of(mix2, &HyperMixing::diag),
          .U2 = part_of(mix2, &HyperMixing::U),
          .Vt2 = part_of(mix2, &HyperMixing::Vt),
          .activation = activation_name(options.activation),
          .layout = layout_name(options.layout),
          .eps = options.eps,
          .scale = options.scale,
          .block = options.block,
          .impl = impl};
}

SEQMIX_OP_FAMILY(declare_hypermlp);

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_op<&hypermlp_read_op>(
      m, "hypermlp_read(Tensor q, Tensor k, Tensor v, Tensor? s1=None, Tensor? diag1=None, Tensor? U1=None, "
         "Tensor? Vt1=None, Tensor? s2=None, Tensor? diag2=None, Tensor? U2=None, Tensor? Vt2=None, "
         "str activation='relu', str layout='lag', float eps=1e-12, float scale=1., int block=256, "
         "str impl='auto', Tensor? cu_seqlens=None) -> Tensor",
      R"doc(HyperMLP's read: attention as a two-layer MLP over the context with diagonal-plus-low-rank (DPLR) mixing
along the sequence before (s1; diag1, U1, Vt1) and after (s2; diag2, U2, Vt2) the activation (relu, glu or softmax).

q [B,T,Hq,dqk], k [B,S,Hq,dqk], v [B,S,H,dvo] -> [B,T,H,dvo] (causal; Hq = H, or 2H for glu). A mixing is
diag [Hm,L], U [Hm,L,r], Vt [Hm,r,L] with the gates s [B,T,Hm,r]; layout "lag" (row L-1-lag) or
"forward" (row = position). impl "fused" is the blocked read, "naive" the dense one (src/ops/hypermlp).
cu_seqlens packs sequences (each read alone from its first token, the mixing shared: eager only).)doc",
      kHypermlpReadImpls);
}
