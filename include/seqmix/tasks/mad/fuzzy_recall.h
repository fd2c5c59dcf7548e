#pragma once
// MAD fuzzy in-context recall (specs/mad.md 2.3): keys and values are motifs of 1..K and 1..Vm distinct
// tokens, left-padded sequences of L tokens; test keys have length K only.
#include "seqmix/tasks/dataset_task.h"
#include "seqmix/tasks/data_rng.h"
#include "seqmix/tasks/mad/recall.h"

namespace seqmix {

struct FuzzyRecallOptions {
  int64_t vocab_size = 16;
  int64_t seq_len = 128;
  int64_t num_train = 12800;
  int64_t num_test = 1280;
  int64_t key_len = 3;    // K, the longest key motif
  int64_t value_len = 3;  // Vm, the longest value motif
  int64_t noise_vocab_size = 0;
  double frac_noise = 0.0;
  bool multi_query = true;  // false: MAD's single-query variant (copy prefix, only the final probe scored)
  uint64_t seed = 12345;
};

void validate(const FuzzyRecallOptions& options);
// One sequence of L+1 tokens (left-padded) before the shift.
TokenExample fuzzy_recall_example(const FuzzyRecallOptions& options, bool training, DataRng& rng);

class FuzzyRecallTask : public DatasetTask {
 public:
  FuzzyRecallTask(const FuzzyRecallOptions& options, std::string resolved_spec);
  std::string name() const override { return "mad.fuzzy_recall"; }
  std::string resolved_spec() const override { return spec_; }
  int64_t vocab_size() const override { return options_.vocab_size; }
  int64_t seq_len() const override { return options_.seq_len; }

 private:
  FuzzyRecallOptions options_;
  std::string spec_;
};

}  // namespace seqmix
