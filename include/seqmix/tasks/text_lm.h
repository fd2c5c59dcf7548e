#pragma once
// Next-token language modelling on a plain-text file, tokenized by a BPE vocabulary that seqmix trains on
// the training split (or loads from a SentencePiece .model file).
// Split: the first (1 - val_fraction) of the file's bytes, extended to the end of that line, is training
// text; the rest is validation. Each split is tokenized on its own, so no window crosses the boundary.
// Training batches are windows at random offsets of the training tokens (deterministic from the seed and
// the batch index); the evaluation set is the validation tokens cut into consecutive windows, so every
// validation token after each window's first is predicted once.
// With documents=lines|paragraphs the text is cut into documents (non-empty lines, or blocks between blank lines,
// each with its newlines), each tokenized alone and read from its own start; a document longer than seq_len + 1
// tokens is cut into pieces of seq_len + 1 (each piece's last token is the next one's first, so every token after
// a document's first is predicted once). Without packing a row holds one piece, padded to the longest row of its
// batch (pad targets are unscored); with pack=1 the pieces fill rows of seq_len first-fit, whole, back to back,
// marked by Batch::sequence_starts, so the model reads each alone and no compute goes to padding but a row's tail.
#include <memory>
#include <string>
#include <vector>

#include "seqmix/io/tokenizer.h"
#include "seqmix/tasks/task.h"

namespace seqmix {

struct TextOptions {
  std::string path = "../shared/data/text/tinyshakespeare.txt";  // UTF-8 text file
  int64_t seq_len = 256;       // tokens per window
  int64_t vocab_size = 2048;   // BPE pieces (special and byte pieces included)
  double val_fraction = 0.1;
  std::string tokenizer;       // a SentencePiece .model to use instead of training one
  int64_t num_test = 0;        // validation windows evaluated (0 = all)
  std::string documents = "none";  // none (one token stream) | lines | paragraphs
  bool pack = false;               // documents packed into full rows (needs documents != none)
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
  // Windows (or document rows) per pass over the training tokens.
  int64_t train_size() const override;
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
  // documents != none: every training row, [R,seq_len] (padded rows are trimmed to their batch's longest), and
  // each row's real length.
  Batch train_rows_;
  std::vector<int64_t> train_row_lengths_;
};

// The documents of a text (documents=lines or paragraphs), each with its newlines, in order.
std::vector<std::string> split_documents(const std::string& text, const std::string& documents);
// Document rows of `seq_len` from each document's tokens: one piece per row (pack = false) or pieces packed
// first-fit (pack = true, with sequence_starts). Rows are padded with input 0 and unscored targets; lengths gets
// each row's last real position + 1.
Batch document_rows(const std::vector<std::vector<int64_t>>& documents, int64_t seq_len, bool pack,
                    std::vector<int64_t>& lengths);

// The training and validation text of a file's content (the split TextTask uses).
std::pair<std::string, std::string> split_text(const std::string& text, double val_fraction);

}  // namespace seqmix
