#include "seqmix/tasks/text_lm.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "seqmix/io/atomic_file.h"
#include "seqmix/io/error.h"
#include "seqmix/tasks/data_rng.h"

namespace seqmix {
namespace {

std::string read_text(const std::string& path) {
  if (path.empty()) throw Error("task text: no path given (text:path=FILE)");
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error&) {
    throw Error("task text: cannot read the text file " + path);
  }
  if (text.empty()) throw Error("task text: the text file " + path + " is empty");
  return text;
}

Tokenizer make_tokenizer(const TextOptions& o, const std::string& train_text) {
  if (o.tokenizer.empty()) return Tokenizer::train(train_text, o.vocab_size);
  Tokenizer t = Tokenizer::load(o.tokenizer);
  if (t.vocab_size() != o.vocab_size)
    throw Error("task text: vocab_size=" + std::to_string(o.vocab_size) + " disagrees with the tokenizer " + o.tokenizer +
                ", which has " + std::to_string(t.vocab_size()) + " pieces");
  return t;
}

// Rows [i*T, i*T + T] of tokens as inputs and targets shifted by one: ([N,T], [N,T]).
Batch consecutive_windows(const std::vector<int64_t>& tokens, int64_t T, int64_t limit) {
  int64_t n = (static_cast<int64_t>(tokens.size()) - 1) / T;
  if (limit > 0) n = std::min(n, limit);
  auto inputs = at::empty({n, T}, at::kLong), targets = at::empty({n, T}, at::kLong);
  auto* x = inputs.data_ptr<int64_t>();
  auto* y = targets.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < T; ++t) {
      x[i * T + t] = tokens[static_cast<size_t>(i * T + t)];
      y[i * T + t] = tokens[static_cast<size_t>(i * T + t + 1)];
    }
  return {inputs, targets};
}

}  // namespace

std::pair<std::string, std::string> split_text(const std::string& text, double val_fraction) {
  if (!(val_fraction > 0.0 && val_fraction < 1.0)) throw Error("task text: val_fraction must lie in (0, 1)");
  size_t cut = static_cast<size_t>(static_cast<double>(text.size()) * (1.0 - val_fraction));
  const size_t line_end = text.find('\n', cut);
  cut = line_end == std::string::npos ? text.size() : line_end + 1;
  return {text.substr(0, cut), text.substr(cut)};
}

TextTask::TextTask(const TextOptions& o, std::string resolved_spec)
    : TextTask(o, std::move(resolved_spec), split_text(read_text(o.path), o.val_fraction)) {}

TextTask::TextTask(const TextOptions& o, std::string resolved_spec, const std::pair<std::string, std::string>& split)
    : options_(o), spec_(std::move(resolved_spec)), tokenizer_(make_tokenizer(o, split.first)) {
  train_tokens_ = tokenizer_.encode(split.first);
  validation_tokens_ = tokenizer_.encode(split.second);
  const auto T = static_cast<size_t>(o.seq_len);
  if (train_tokens_.size() <= T + 1)
    throw Error("task text: the training split of " + o.path + " has " + std::to_string(train_tokens_.size()) +
                " tokens, fewer than seq_len + 2 = " + std::to_string(T + 2));
  if (validation_tokens_.size() <= T)
    throw Error("task text: the validation split of " + o.path + " has " + std::to_string(validation_tokens_.size()) +
                " tokens, fewer than seq_len + 1 = " + std::to_string(T + 1) + " (raise val_fraction or lower seq_len)");
  test_ = consecutive_windows(validation_tokens_, o.seq_len, o.num_test);
}

Batch TextTask::train_batch(int64_t batch_index, int64_t batch_size) {
  const int64_t T = options_.seq_len;
  const int64_t starts = static_cast<int64_t>(train_tokens_.size()) - T;  // windows need T + 1 tokens
  auto inputs = at::empty({batch_size, T}, at::kLong), targets = at::empty({batch_size, T}, at::kLong);
  auto* x = inputs.data_ptr<int64_t>();
  auto* y = targets.data_ptr<int64_t>();
  const uint64_t stream = derive_seed(options_.seed, 0x54455854ULL);  // "TEXT"
  for (int64_t i = 0; i < batch_size; ++i) {
    DataRng rng(derive_seed(stream, static_cast<uint64_t>(batch_index * batch_size + i)));
    const auto s = static_cast<size_t>(rng.below(starts));
    std::copy_n(train_tokens_.begin() + static_cast<std::ptrdiff_t>(s), T, x + i * T);
    std::copy_n(train_tokens_.begin() + static_cast<std::ptrdiff_t>(s + 1), T, y + i * T);
  }
  return {inputs, targets};
}

void TextTask::add_metrics(const at::Tensor& outputs, const Batch& batch, MetricSums& sums) const {
  auto right = (outputs.argmax(-1) == batch.targets).sum().item<double>();
  sums.add("token_accuracy", right, static_cast<double>(batch.targets.numel()));
}

std::vector<std::pair<std::string, std::string>> TextTask::training_defaults() const {
  return {{"train.lr", "1e-3"},       {"train.batch_size", "16"}, {"train.steps", "2000"},
          {"train.warmup", "100"},    {"train.min_lr", "1e-4"},   {"train.grad_clip", "1.0"},
          {"train.eval_every", "200"}, {"train.target", "0"}};
}

std::map<std::string, std::string> TextTask::artifacts() const { return {{"tokenizer.model", tokenizer_.serialized()}}; }

}  // namespace seqmix
