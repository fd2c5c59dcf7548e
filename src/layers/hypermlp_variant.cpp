#include "seqmix/layers/hypermlp_variant.h"

#include <algorithm>


#include "seqmix/io/error.h"
#include "seqmix/io/printable.h"

namespace seqmix {
namespace {

const char* kGrammar =
    "a label is Base[-Feat][-Rank][-Mix][!]: Base S, R or G; Feat from p, c, g in that order; Rank q or v; "
    "Mix 1, 2 or 12 with an optional o (lag layout); ! for no compression (e.g. R-cg-q-12o, G-c-12o!)";

std::vector<std::string> split_dashes(const std::string& text) {
  std::vector<std::string> parts(1);
  for (char ch : text) {
    if (ch == '-') parts.emplace_back();
    else parts.back() += ch;
  }
  return parts;
}

enum Part { kBase = 0, kFeat = 1, kRank = 2, kMix = 3 };

bool is_mix_part(const std::string& p) {
  std::string core = !p.empty() && p.back() == 'o' ? p.substr(0, p.size() - 1) : p;
  return core == "1" || core == "2" || core == "12";
}

// The canonical label of a variant (the parts in order).
std::string label_of(const HyperVariant& v) {
  std::string label(1, v.base);
  std::string feat = std::string(v.rope ? "p" : "") + (v.conv ? "c" : "") + (v.gates ? "g" : "");
  if (!feat.empty()) label += "-" + feat;
  if (v.budget == HyperVariant::Budget::match_qk) label += "-q";
  if (v.budget == HyperVariant::Budget::match_vo) label += "-v";
  if (v.mixes())
    label += std::string("-") + (v.mix_before ? "1" : "") + (v.mix_after ? "2" : "") + (v.lag ? "o" : "");
  if (v.budget == HyperVariant::Budget::over) label += "!";
  return label;
}

// The matched rank on one side: the largest multiple of `unit` up to d whose layer fits the budget,
// or 0 if none does.
int64_t largest_fitting_rank(const HyperVariant& v, const HyperShape& s, int64_t unit, bool qk_side,
                             int64_t budget) {
  for (int64_t rank = (s.dim / unit) * unit; rank >= unit; rank -= unit) {
    const int64_t count = qk_side ? hyper_parameter_count(v, s, rank, s.dim) : hyper_parameter_count(v, s, s.dim, rank);
    if (count <= budget) return rank;
  }
  return 0;
}

}  // namespace

HyperVariant HyperVariant::parse(const std::string& label) {
  auto fail = [&label](const std::string& why) {
    throw Error("variant '" + label + "': " + why + "; " + kGrammar);
  };
  HyperVariant v;
  v.label = label;
  std::string body = label;
  const bool bang = !body.empty() && body.back() == '!';
  if (bang) body.pop_back();
  const auto parts = split_dashes(body);
  if (parts[0].size() != 1 || std::string("SRG").find(parts[0][0]) == std::string::npos)
    fail("the base must be S, R or G");
  v.base = parts[0][0];
  int stage = kBase;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    int kind;
    if (p.empty()) fail("empty part between dashes");
    if (p.find_first_not_of("pcg") == std::string::npos) {
      kind = kFeat;
      size_t last = 0;
      for (size_t j = 0; j < p.size(); ++j) {
        const size_t at = std::string("pcg").find(p[j]) + 1;
        if (at <= last) fail("feature letters must appear once each, in the order p, c, g (got '" + p + "')");
        last = at;
      }
      v.rope = p.find('p') != std::string::npos;
      v.conv = p.find('c') != std::string::npos;
      v.gates = p.find('g') != std::string::npos;
    } else if (p == "q" || p == "v") {
      kind = kRank;
      v.budget = p == "q" ? Budget::match_qk : Budget::match_vo;
    } else if (is_mix_part(p)) {
      kind = kMix;
      v.mix_before = p[0] == '1';
      v.mix_after = p.find('2') != std::string::npos;
      v.lag = p.back() == 'o';
    } else {
      fail("unknown part '" + p + "'");
    }
    if (kind <= stage) fail("part '" + p + "' is repeated or out of order");
    stage = kind;
  }
  if (bang) {
    if (v.budget != Budget::full) fail("'!' (no compression) contradicts the matched budget q/v");
    v.budget = Budget::over;
  } else if (v.budget == Budget::full && (v.gates || v.mixes())) {
    fail("gates (g) and temporal mixing (1, 2, 12) add parameters: add the matched budget q or v, or mark the "
         "label over budget with '!'");
  }
  return v;
}

const std::vector<std::pair<std::string, std::string>>& hyper_table1_labels() {
  static const std::vector<std::pair<std::string, std::string>> labels = {
      {"S", "SoftmaxAttn"},     {"S-p", ""},          {"S-c", ""},          {"S-pc", ""},
      {"R", "ReLUAttn"},        {"R-p", ""},          {"R-c", ""},          {"R-pc", ""},
      {"S-g-q", ""},            {"R-cg-q", ""},       {"R-c-12o!", ""},     {"R-cg-q-12o", "HyperMLP"},
      {"R-pcg-q-12o", ""},      {"S-c-q", ""},        {"S-c-v", ""},        {"R-c-q", ""},
      {"R-c-v", ""},            {"G-cg-q", ""},       {"G-c-12o!", ""},     {"G-cg-q-12o", "HyperGLU"},
      {"G-pcg-q-12o", ""},      {"G-cg-q-1o", ""},    {"R-cg-q-1o", ""},    {"G-g-q-12o", ""},
      {"R-g-q-12o", ""},        {"G-12o!", ""},       {"G-1o!", ""},        {"G-2o!", ""},
      {"R-12o!", ""},           {"R-1o!", ""},        {"R-2!", ""},         {"G-12!", ""},
      {"R-12!", ""}};
  return labels;
}

int64_t softmax_attention_parameters(int64_t dim, bool bias) { return 4 * dim * dim + (bias ? 4 * dim : 0); }

int64_t hyper_parameter_count(const HyperVariant& v, const HyperShape& s, int64_t qk_rank, int64_t vo_rank) {
  const int64_t d = s.dim, r = s.mix_rank, score_heads = s.heads * v.score_heads_per_head();
  int64_t n = 2 * d * qk_rank + 2 * d * vo_rank;                 // W_q, W_k, W_v, W_o
  if (s.bias) n += 2 * qk_rank + vo_rank + d;
  if (v.gates) n += (d + 1) * qk_rank + (d + 1) * vo_rank;      // M1, M2 with biases
  auto mixing = [&](int64_t heads) { return (d + 1) * heads * r + heads * s.max_len * (2 * r + 1); };
  if (v.mix_before) n += mixing(score_heads);  // S1 controls; p1, U1, Vt1
  if (v.mix_after) n += mixing(s.heads);       // S2 controls; p2, U2, Vt2
  return n;
}

HyperRanks resolve_hyper_ranks(const std::string& mixer, const HyperVariant& v, const HyperShape& s,
                               int64_t qk_rank, int64_t vo_rank) {
  const std::string who = "mixer " + mixer + " (variant " + v.label + ")";
  if (s.heads <= 0) throw Error(who + ": heads must be positive");
  if (v.mixes() && s.mix_rank < 0) throw Error(who + ": mix_rank must be >= 0 (0 = chosen to fit)");
  if (v.mixes() && s.max_len <= 0)
    throw Error(who + ": temporal mixing stores its parameters per position and needs max_len (the model's "
                "sequence length, or max_len=N)");
  if ((qk_rank > 0 || vo_rank > 0) && v.budget != HyperVariant::Budget::over)
    throw Error(who + ": qk_rank and vo_rank are set by the label; setting them by hand needs an over-budget "
                "label ending in '!'");
  const int64_t score_heads = s.heads * v.score_heads_per_head();
  const int64_t qk_unit = score_heads * (v.rope ? 2 : 1), vo_unit = s.heads;
  HyperRanks ranks;
  ranks.budget = softmax_attention_parameters(s.dim, s.bias);
  ranks.qk_rank = qk_rank > 0 ? qk_rank : s.dim;
  ranks.vo_rank = vo_rank > 0 ? vo_rank : s.dim;
  HyperShape shape = s;
  const bool choose_mix_rank = v.mixes() && s.mix_rank == 0;
  if (choose_mix_rank) shape.mix_rank = kPaperMixRank;
  const bool match_qk = v.budget == HyperVariant::Budget::match_qk;
  if (match_qk || v.budget == HyperVariant::Budget::match_vo) {
    const int64_t unit = match_qk ? qk_unit : vo_unit;
    int64_t rank = largest_fitting_rank(v, shape, unit, match_qk, ranks.budget);
    const int64_t paper_rank = std::max<int64_t>(s.dim / 8, 1);
    if (choose_mix_rank && rank < paper_rank) {
      const auto matched_rank_at = [&](int64_t mix_rank) {
        HyperShape with = shape;
        with.mix_rank = mix_rank;
        return largest_fitting_rank(v, with, unit, match_qk, ranks.budget);
      };
      // Halve r_s until the matched side keeps the paper's HyperGLU QK rank, d/8 (d_qk = d / (8 n_head) per head);
      // else the largest r_s that leaves it a rank step; else the smallest layer of the label, over budget.
      int64_t chosen = 0;
      for (int64_t r = kPaperMixRank / 2; r >= 1 && chosen == 0; r /= 2)
        if (matched_rank_at(r) >= paper_rank) chosen = r;
      for (int64_t r = kPaperMixRank; r >= 1 && chosen == 0; --r)
        if (matched_rank_at(r) > 0) chosen = r;
      shape.mix_rank = chosen > 0 ? chosen : 1;
      rank = chosen > 0 ? matched_rank_at(chosen) : unit;
    }
    if (rank == 0) {
      std::string advice;
      for (int64_t r = s.mix_rank - 1; v.mixes() && r >= 1 && advice.empty(); --r) {
        HyperShape smaller = s;
        smaller.mix_rank = r;
        const int64_t fit = largest_fitting_rank(v, smaller, unit, match_qk, ranks.budget);
        if (fit > 0)
          advice = "mix_rank=" + std::to_string(r) + " (the largest that fits, leaving a " + (match_qk ? "QK" : "VO") +
                   " rank of " + std::to_string(fit) + "), ";
      }
      HyperVariant over = v;
      over.budget = HyperVariant::Budget::over;
      const std::string mixing =
          v.mixes() ? " and max_len " + std::to_string(s.max_len) + " with mix_rank=" + std::to_string(s.mix_rank) : "";
      throw Error(who + ": cannot match softmax attention's " + with_commas(ranks.budget) + " parameters at width " +
                  std::to_string(s.dim) + mixing + ": the rest of the layer leaves no room for a " +
                  (match_qk ? "QK" : "VO") + " rank of " + std::to_string(unit) + "; use " + advice +
                  (v.mixes() ? "mix_rank=0 (chosen to fit), " : "") + "a wider model, or the over-budget label " +
                  label_of(over));
    }
    (match_qk ? ranks.qk_rank : ranks.vo_rank) = rank;
  }
  ranks.mix_rank = v.mixes() ? shape.mix_rank : 0;
  if (ranks.qk_rank % qk_unit != 0)
    throw Error(who + ": qk_rank " + std::to_string(ranks.qk_rank) + " must be a multiple of " +
                std::to_string(qk_unit) + " (" + std::to_string(score_heads) + " score heads" +
                (v.rope ? ", an even width each for RoPE" : "") + ")");
  if (ranks.vo_rank % vo_unit != 0)
    throw Error(who + ": vo_rank " + std::to_string(ranks.vo_rank) + " must be a multiple of heads=" +
                std::to_string(s.heads));
  ranks.parameters = hyper_parameter_count(v, shape, ranks.qk_rank, ranks.vo_rank);
  return ranks;
}

}  // namespace seqmix
