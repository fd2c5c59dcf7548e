#pragma once
// MAD's in-context recall and noisy in-context recall (specs/mad.md 2.1, 2.2): key/value pairs drawn
// with replacement from disjoint key and value vocabularies, a fresh map per sequence; in the
// multi-query variant every repeated key's value is scored, plus the final query.
#include <cstdint>
#include <vector>

#include "seqmix/tasks/dataset_task.h"
#include "seqmix/tasks/data_rng.h"

namespace seqmix {

struct RecallOptions {
  int64_t vocab_size = 16;
  int64_t seq_len = 128;          // L in MAD's config; the model sees L-1 (multi-query) or L tokens
  int64_t num_train = 12800;
  int64_t num_test = 1280;
  int64_t noise_vocab_size = 0;   // top ids reserved as noise tokens
  double frac_noise = 0.0;        // share of 2-token slots that are noise
  bool multi_query = true;
  uint64_t seed = 12345;
};

// One sequence before the shift: tokens and per-token labels (kIgnoreIndex where unscored).
struct TokenExample {
  std::vector<int64_t> tokens, labels;
};
TokenExample recall_example(const RecallOptions& options, DataRng& rng);
// Checks the options and throws Error naming the first violated requirement.
void validate(const RecallOptions& options);

class RecallTask : public DatasetTask {
 public:
  RecallTask(std::string name, const RecallOptions& options, std::string resolved_spec);
  std::string name() const override { return name_; }
  std::string resolved_spec() const override { return spec_; }
  int64_t vocab_size() const override { return options_.vocab_size; }
  int64_t seq_len() const override;

 private:
  std::string name_, spec_;
  RecallOptions options_;
};

}  // namespace seqmix
