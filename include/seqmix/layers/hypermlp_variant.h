#pragma once
// HyperMLP's variant labels (the paper's Table 1): Base[-Feat][-Rank][-Mix][!], e.g. R-cg-q-12o.
//   Base  S softmax, R ReLU o L2Norm (HyperMLP), G GLU (HyperGLU)
//   Feat  any of p (RoPE on q, k), c (depthwise causal conv, kernel 4, on the K and V inputs),
//         g (sigmoid gates M1 on q, M2 on the read), in this order
//   Rank  q or v: matched budget, the QK (q) or VO (v) rank shrunk until the layer has softmax attention's
//         parameter count (4 d^2, plus 4 d with biases; the convs aside)
//   Mix   1, 2 or 12: DPLR sequence mixing before (R1), after (R2) or on both sides of the activation,
//         then o for the lag (reverse-offset) layout; without o the forward layout
//   !     no compression: full ranks, over budget
// And the ranks and parameter count each label implies at a given width.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace seqmix {

struct HyperVariant {
  enum class Budget { full, match_qk, match_vo, over };

  std::string label;
  char base = 'R';
  bool rope = false, conv = false, gates = false;
  Budget budget = Budget::full;
  bool mix_before = false, mix_after = false;  // R1, R2
  bool lag = false;                            // o

  // Throws Error naming the label and the grammar when it does not parse or is inconsistent.
  static HyperVariant parse(const std::string& label);
  bool mixes() const { return mix_before || mix_after; }
  // Score heads per value head: 2 for G (a gate and a scale), else 1.
  int64_t score_heads_per_head() const { return base == 'G' ? 2 : 1; }
};

// Every row of the paper's Table 1, with its name there.
const std::vector<std::pair<std::string, std::string>>& hyper_table1_labels();

struct HyperShape {
  int64_t dim = 128;
  int64_t heads = 2;
  int64_t mix_rank = 0;   // r_s; 0 = chosen by resolve_hyper_ranks
  int64_t max_len = 0;    // Lmax of the mixing parameters
  bool bias = false;      // biases on W_q, W_k, W_v, W_o (the gates and controls always have them)
};

struct HyperRanks {
  int64_t qk_rank = 0, vo_rank = 0;  // totals over the score heads and the value heads
  int64_t mix_rank = 0;              // r_s of the mixers (labels with 1, 2, 12), else 0
  int64_t parameters = 0;            // the layer without its convs
  int64_t budget = 0;                // softmax attention at this width
};

// Parameters of a layer with these ranks, convs excluded.
int64_t hyper_parameter_count(const HyperVariant& variant, const HyperShape& shape, int64_t qk_rank, int64_t vo_rank);
// Softmax attention's count at this width: 4 d^2 (+ 4 d with biases).
int64_t softmax_attention_parameters(int64_t dim, bool bias);
// The paper's rank r_s of the DPLR mixers, mix_rank's choice wherever the budget leaves room for it.
constexpr int64_t kPaperMixRank = 16;
// The ranks the label implies: full (d, d) unless q or v, which take the largest rank (a multiple of the
// head count, even per head with RoPE) that keeps the layer within the budget: within one rank step of it,
// which is within 1% wherever a step costs less (e.g. every matched Table 1 label at d >= 384). A mix_rank
// given (> 0) is kept, and when no rank fits it is an error naming `mixer` and saying what would. mix_rank 0
// chooses: kPaperMixRank where the matched rank stays at least d/8 (the paper's HyperGLU QK rank), else r_s halved
// until it does; where no power of two does, the largest r_s that leaves a rank step; where none does (the mixers
// alone outgrow the budget: narrow layers over long max_len), r_s = 1 with one rank step, the smallest layer of
// the label, over budget (HyperRanks::parameters > budget says so). qk_rank/vo_rank > 0 set the ranks by hand
// (only with '!').
HyperRanks resolve_hyper_ranks(const std::string& mixer, const HyperVariant& variant, const HyperShape& shape,
                               int64_t qk_rank = 0, int64_t vo_rank = 0);

}  // namespace seqmix
