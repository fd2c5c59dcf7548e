#pragma once
// Next-token language modelling on a plain-text file, tokenized by a BPE vocabulary that seqmix trains on
// the training split (or loads from a SentencePiece .model file).
// Split: the first (1 - val_fraction) of the file's bytes, extended to the end of that line, is training
// text; the rest is validation. Each split is tokenized on its own, so no window crosses the boundary.
// Training batches are windows at random offsets of the training tokens (deterministic from the seed and
// the batch index); the evaluation set is the validation tokens cut into consecutive windows, so every
// validation token after each window's first is predicted once.
#include <memory>
#include <string>
#include <vector>

#include "seqmix/io/tokenizer.h"
#include "seqmix/tasks/task.h"

namespace seqmix {

struct TextOptions {
  std::string path;            // UTF-8 text file
  int64_t seq_len = 256;       // tokens per window
  int64_t vocab_size = 2048;   // BPE pieces (special and byte pieces included)
  double val_fraction = 0.1;
  std::string tokenizer;       // a SentencePiece .model to use instead of training one
  int64_t num_test = 0;        // validation windows evaluated (0 = all)
  uint64_t seed = 12345;
};

class TextTask : public Task {
 public:
  TextTask(const TextOptions& options, std::string resolved_spec);
  std::string name() const override { return "text"; }
  std::string resolved_spec() const override { return spec_; }
  int64_t vocab_size() const override { return tokenizer_.vocab_size(); }
  int64_t seq_len() const override { return options_.seq_len; }
  Batch train_batch(int64_t batch_index, int64_t batch_size) override;
  // Windows per pass over the training tokens.
  int64_t train_size() const override { return static_cast<int64_t>(train_tokens_.size()) / options_.seq_len; }
  const Batch& test_set() override { return test_; }
  int64_t eval_batch_size() const override { return 16; }
  void add_metrics(const at::Tensor& outputs, const Batch& batch, MetricSums& sums) const override;
  // Validation cross-entropy per token (nats).
  std::string primary_metric() const override { return "loss"; }
  bool higher_is_better() const override { return false; }
  std::vector<std::pair<std::string, std::string>> training_defaults() const override;
  std::map<std::string, std::string> artifacts() const override;

  const Tokenizer& tokenizer() const { return tokenizer_; }
  const std::vector<int64_t>& train_tokens() const { return train_tokens_; }
  const std::vector<int64_t>& validation_tokens() const { return validation_tokens_; }

 private:
  TextTask(const TextOptions& options, std::string resolved_spec, const std::pair<std::string, std::string>& split);
  TextOptions options_;
  std::string spec_;
  Tokenizer tokenizer_;
  std::vector<int64_t> train_tokens_, validation_tokens_;
  Batch test_;
};

// The training and validation text of a file's content (the split TextTask uses).
std::pair<std::string, std::string> split_text(const std::string& text, double val_fraction);

}  // namespace seqmix
