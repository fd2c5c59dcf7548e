#include "seqmix/layers/hypermlp.h"

#include "seqmix/layers/mixer_spec.h"

#include <torch/torch.h>

#include <cmath>

#include "seqmix/io/error.h"
#include "seqmix/io/printable.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"
#include "seqmix/modules/rotary.h"

namespace seqmix {
namespace {

constexpr int64_t kConvKernel = 4;  // the paper's depthwise conv on the K and V inputs
constexpr double kInitStd = 0.02;   // every weight, the DPLR factors included (paper App. L)

torch::nn::Linear linear(int64_t in, int64_t out, bool bias) {
  torch::nn::Linear l(torch::nn::LinearOptions(in, out).bias(bias));
  init_linear(l, kInitStd);
  return l;
}

}  // namespace

HyperMlpImpl::HyperMlpImpl(std::string kind, const HyperMlpOptions& options)
    : MixerImpl(std::move(kind), options.dim, /*causal=*/true), options_(options) {
  const HyperVariant& v = options.variant;
  const HyperShape shape{options.dim, options.heads, options.mix_rank, options.max_len, options.bias};
  ranks_ = resolve_hyper_ranks(this->kind(), v, shape, options.qk_rank, options.vo_rank);
  score_heads_ = options.heads * v.score_heads_per_head();
  if (options.block < 0) throw Error("mixer " + this->kind() + ": block must be >= 0 (0 = one block)");

  wq = register_module("wq", linear(options.dim, ranks_.qk_rank, options.bias));
  wk = register_module("wk", linear(options.dim, ranks_.qk_rank, options.bias));
  wv = register_module("wv", linear(options.dim, ranks_.vo_rank, options.bias));
  wo = register_module("wo", linear(ranks_.vo_rank, options.dim, options.bias));
  if (v.gates) {
    qk_gate = register_module("qk_gate", linear(options.dim, ranks_.qk_rank, true));
    vo_gate = register_module("vo_gate", linear(options.dim, ranks_.vo_rank, true));
  }
  if (v.conv) {
    conv_k = register_module("conv_k", CausalDepthwiseConv(options.dim, kConvKernel, kInitStd));
    conv_v = register_module("conv_v", CausalDepthwiseConv(options.dim, kConvKernel, kInitStd));
  }
  auto make_mixing = [&](const std::string& name, int64_t heads) {
    const int64_t L = options.max_len, r = ranks_.mix_rank;
    ops::HyperMixing m;
    m.diag = register_parameter(name + "_diag", torch::zeros({heads, L}));
    m.U = register_parameter(name + "_U", torch::randn({heads, L, r}) * kInitStd);
    m.Vt = register_parameter(name + "_Vt", torch::randn({heads, r, L}) * kInitStd);
    return m;
  };
  if (v.mix_before) {
    control1 = register_module("control1", linear(options.dim, score_heads_ * ranks_.mix_rank, true));
    mix1 = make_mixing("mix1", score_heads_);
  }
  if (v.mix_after) {
    control2 = register_module("control2", linear(options.dim, options.heads * ranks_.mix_rank, true));
    mix2 = make_mixing("mix2", options.heads);
  }
  read_options_.activation = v.base == 'S'   ? ops::HyperActivation::softmax
                             : v.base == 'G' ? ops::HyperActivation::glu
                                             : ops::HyperActivation::relu;
  read_options_.layout = v.lag ? ops::HyperLayout::lag : ops::HyperLayout::forward;
  read_options_.eps = options.eps;
  read_options_.block = options.block;
  read_options_.scale = v.base == 'S' ? 1.0 / std::sqrt(double(ranks_.qk_rank / score_heads_)) : 1.0;
  if (v.mixes() && options.mix_rank == 0 && ranks_.parameters > ranks_.budget)
    TORCH_WARN("mixer ", this->kind(), " (variant ", v.label, "): at width ", options.dim, " and max_len ",
               options.max_len, " even mix_rank 1 outgrows softmax attention's ", with_commas(ranks_.budget),
               " parameters; built the smallest layer of the label (mix_rank 1, ", with_commas(ranks_.parameters),
               " parameters, convs aside)");
}

void HyperMlpImpl::pretty_print(std::ostream& stream) const {
  stream << kind() << "(variant=" << options_.variant.label << ", qk_rank=" << ranks_.qk_rank
         << ", vo_rank=" << ranks_.vo_rank;
  if (options_.variant.mixes()) stream << ", mix_rank=" << ranks_.mix_rank << ", max_len=" << options_.max_len;
  stream << ", " << with_commas(ranks_.parameters) << " parameters without the convs, softmax attention's "
         << with_commas(ranks_.budget) << (ranks_.parameters > ranks_.budget ? ": over budget)" : ")");
}

void HyperMlpImpl::check_length(int64_t positions) const {
  if (options_.variant.mixes() && positions > options_.max_len)
    throw Error("mixer " + kind() + ": position " + std::to_string(positions - 1) + " is beyond max_len=" +
                std::to_string(options_.max_len) + " (the sequence-mixing parameters are stored per position)");
}

HyperMlpImpl::Projected HyperMlpImpl::project(const torch::Tensor& x, const torch::Tensor& xk,
                                              const torch::Tensor& xv, int64_t offset) {
  const HyperVariant& v = options_.variant;
  Projected p;
  p.q = split_heads(wq(x), score_heads_);
  p.k = split_heads(wk(xk), score_heads_);
  p.v = split_heads(wv(xv), options_.heads);
  if (v.rope) {  // RoPE before the gate; k is not gated
    p.q = apply_rotary(p.q, offset, options_.rope_theta);
    p.k = apply_rotary(p.k, offset, options_.rope_theta);
  }
  if (v.gates) p.q = p.q * split_heads(torch::sigmoid(qk_gate(x)), score_heads_);
  if (v.mix_before) p.s1 = split_heads(torch::sigmoid(control1(x)), score_heads_);
  if (v.mix_after) p.s2 = split_heads(torch::sigmoid(control2(x)), options_.heads);
  return p;
}

torch::Tensor HyperMlpImpl::read(const Projected& p, const torch::Tensor& k, const torch::Tensor& v) {
  return ops::hypermlp_read(p.q, k, v,
                            ops::hypermlp_read_args(p.s1, mix1, p.s2, mix2, read_options_,
                                                    options_.dense ? ops::Impl::naive : ops::Impl::automatic));
}

torch::Tensor HyperMlpImpl::output(const torch::Tensor& read, const torch::Tensor& x) {
  auto r = options_.variant.gates ? read * split_heads(torch::sigmoid(vo_gate(x)), options_.heads) : read;
  return wo(merge_heads(r));
}

torch::Tensor HyperMlpImpl::forward(const torch::Tensor& x) {
  check_input(x);
  check_length(x.size(1));
  const bool conv = options_.variant.conv;
  auto p = project(x, conv ? conv_k(x) : x, conv ? conv_v(x) : x, 0);
  return output(read(p, p.k, p.v), x);
}

namespace {
struct HyperMlpState {
  torch::Tensor k, v;  // the cache [B,S,Hs,rq], [B,S,H,rv]
  torch::Tensor conv;  // the last K-1 raw inputs (labels with c)
};
}  // namespace

DecodeState HyperMlpImpl::init_state(int64_t batch) const {
  const auto opts = wq->weight.options();
  HyperMlpState s{torch::zeros({batch, 0, score_heads_, ranks_.qk_rank / score_heads_}, opts),
                  torch::zeros({batch, 0, options_.heads, ranks_.vo_rank / options_.heads}, opts), {}};
  if (options_.variant.conv) s.conv = conv_k->initial_window(batch);
  return DecodeState::of(std::move(s));
}

torch::Tensor HyperMlpImpl::prefill(const torch::Tensor& x, DecodeState& state) {
  check_input(x);
  check_length(state.position + x.size(1));
  auto& s = state.as<HyperMlpState>(kind());
  torch::Tensor xk = x, xv = x;
  if (options_.variant.conv) {
    // The convs see the previous K-1 inputs: run them on [window, x] and keep the outputs of x.
    auto full = torch::cat({s.conv, x}, 1);
    xk = conv_k(full).narrow(1, kConvKernel - 1, x.size(1));
    xv = conv_v(full).narrow(1, kConvKernel - 1, x.size(1));
    s.conv = full.narrow(1, full.size(1) - (kConvKernel - 1), kConvKernel - 1);
  }
  auto p = project(x, xk, xv, state.position);
  s.k = torch::cat({s.k, p.k}, 1);
  s.v = torch::cat({s.v, p.v}, 1);
  state.position += x.size(1);
  return output(read(p, s.k, s.v), x);
}

torch::Tensor HyperMlpImpl::step(const torch::Tensor& x_t, DecodeState& state) {
  check_step_input(x_t);
  return prefill(x_t.unsqueeze(1), state).squeeze(1);
}

// hypermlp (bases S, R) and hyperglu (base G): one layer, any Table 1 label.
namespace {

// HyperGLU's options: HyperMLP's with a G label.
struct HyperGluOptions : HyperMlpOptions {
  HyperGluOptions() { variant = HyperVariant::parse("G-cg-q-12o"); }
};

std::vector<std::string> hyper_notes(bool glu) {
  std::vector<std::string> notes = {"Table 1 labels (variant=...):"};
  std::string line;
  for (const auto& [label, title] : hyper_table1_labels()) {
    if ((label[0] == 'G') != glu) continue;
    const std::string item = title.empty() ? label : label + " (" + title + ")";
    if (line.size() + item.size() > 90) notes.push_back("  " + line), line.clear();
    line += (line.empty() ? "" : ", ") + item;
  }
  notes.push_back("  " + line);
  notes.push_back("Grammar: Base[-Feat][-Rank][-Mix][!]; Feat from p (RoPE), c (KV conv), g (gates); Rank q|v "
                  "(matched budget); Mix 1|2|12 (+o lag layout); ! no compression.");
  notes.push_back("mix_rank=0 (the default) takes the paper's r_s = 16 where the matched rank stays at least d/8 "
                  "(the paper's HyperGLU QK rank), else halves r_s until it does; where no power of two does, the "
                  "largest r_s that leaves one rank step; where even r_s = 1 outgrows softmax's 4 d^2 (a narrow "
                  "layer over a long max_len) the smallest layer of the label, r_s = 1 and one rank step, over "
                  "budget, with a warning. The layer's description gives its ranks and parameters against the budget.");
  return notes;
}

template <class O>
std::vector<Field<O>> hyper_fields(const std::string& name) {
  const std::string label = O{}.variant.label;
  return {Field<O>::custom(OptionInfo::text("variant", label, "variant label, e.g. " + label + " (listed below)"),
                           [name](const Options& o, O& out) {
                             try {
                               out.variant = HyperVariant::parse(o.text("variant"));
                             } catch (const Error& e) {
                               throw Error("mixer " + name + ": " + e.what());
                             }
                           }),
          Field<O>::integer("heads", &O::heads, "value heads (the paper fixes 2; G has 2 score heads per value head)", 1),
          Field<O>::integer("mix_rank", &O::mix_rank,
                            "rank r_s of the DPLR sequence mixers (labels with 1, 2, 12); 0 = 16, or less where a "
                            "matched budget needs it (below)",
                            0),
          Field<O>::integer("max_len", &O::max_len, "positions the mixing parameters cover (0 = the model's length)", 0),
          Field<O>::integer("qk_rank", &O::qk_rank, "total QK rank by hand (0 = from the label; '!' labels only)", 0),
          Field<O>::integer("vo_rank", &O::vo_rank, "total VO rank by hand (0 = from the label; '!' labels only)", 0),
          Field<O>::integer("block", &O::block, "query rows per block of the blocked read (0 = one block)", 0),
          Field<O>::real("rope_theta", &O::rope_theta, "RoPE base (labels with p)", 1.0),
          Field<O>::real("eps", &O::eps, "under the square root of the score-row norm (R, G)", 0.0),
          Field<O>::flag("bias", &O::bias, "biases on W_q, W_k, W_v, W_o (gates and controls always have them)"),
          Field<O>::choice("path", &O::dense, {{"blocked", false}, {"dense", true}},
                           "blocked read (row blocks, no t x t mixer) or its dense naive twin (O(T^3))")};
}

// The label's base must be the mixer's, and a value other than the default that the label would ignore is an
// error. (Not `was_given`: a resolved spec, as a run's config.yaml holds it, spells every option out.)
void check_hyper(const std::string& name, bool glu, const HyperMlpOptions& h) {
  const HyperMlpOptions defaults;
  const HyperVariant& v = h.variant;
  if ((v.base == 'G') != glu)
    throw Error("mixer " + name + ": variant " + v.label + " has base " + v.base + "; " +
                (glu ? "hyperglu takes G labels (use hypermlp for S and R)" : "hypermlp takes S and R labels (use hyperglu for G)"));
  if (h.rope_theta != defaults.rope_theta && !v.rope)
    throw Error("mixer " + name + ": rope_theta applies only to labels with p (RoPE); variant " + v.label + " has none");
  if (h.mix_rank != defaults.mix_rank && !v.mixes())
    throw Error("mixer " + name + ": mix_rank applies only to labels with temporal mixing (1, 2, 12); variant " +
                v.label + " has none");
  if (h.max_len != defaults.max_len && !v.mixes())
    throw Error("mixer " + name + ": max_len applies only to labels with temporal mixing (1, 2, 12); variant " +
                v.label + " has none");
  if (h.block != defaults.block && h.dense) throw Error("mixer " + name + ": block applies to path=blocked only");
}

// HyperMLP (glu false) or HyperGLU in the model's context: the mixing parameters cover max_len positions, the model's
// length unless given; no raw-value read.
template <class O, bool glu>
Mixer make_hyper(const O& o, const MixerContext& context) {
  refuse_raw_values(context);
  O placed = o;
  placed.dim = context.dim;
  if (placed.max_len <= 0) placed.max_len = context.max_len;
  return std::make_shared<HyperMlpImpl>(glu ? "hyperglu" : "hypermlp", placed);
}

}  // namespace

const MixerDeclaration& hypermlp_mixer_declaration() {
  using O = HyperMlpOptions;
  static const MixerDeclaration declaration =
      MixerDeclarationOf<O>{
          .name = "hypermlp",
          .meaning = "HyperMLP: attention as a dynamic 2-layer MLP with DPLR sequence mixing (S and R labels)",
          .fields = hyper_fields<O>("hypermlp"),
          .make = make_hyper<O, false>,
          .check = [](const O& o) { check_hyper("hypermlp", false, o); },
          .notes = hyper_notes(false)}
          .erase();
  return declaration;
}

const MixerDeclaration& hyperglu_mixer_declaration() {
  using O = HyperGluOptions;
  static const MixerDeclaration declaration =
      MixerDeclarationOf<O>{
          .name = "hyperglu",
          .meaning = "HyperGLU: HyperMLP with Softplus(scale) * ReLU(L2Norm(gate)) (G labels)",
          .fields = hyper_fields<O>("hyperglu"),
          .make = make_hyper<O, true>,
          .check = [](const O& o) { check_hyper("hyperglu", true, o); },
          .notes = hyper_notes(true)}
          .erase();
  return declaration;
}

}  // namespace seqmix
