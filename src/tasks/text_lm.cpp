#include "seqmix/tasks/text_lm.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>

#include "seqmix/io/atomic_file.h"
#include "seqmix/io/error.h"
#include "seqmix/io/runtime.h"
#include "seqmix/tasks/data_rng.h"

namespace seqmix {
namespace {

std::string read_text(const std::string& path) {
  if (path.empty()) throw Error("task text: no path given (text:path=FILE)");
  // The text and its splits are held whole: at least twice the file, checked before it is read.
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && 2.0 * static_cast<double>(size) > static_cast<double>(physical_memory_bytes()))
    throw Error("task text: the text file " + path + " holds " + gigabytes(static_cast<double>(size)) +
                "; the task holds it and its splits in memory, at least " + gigabytes(2.0 * static_cast<double>(size)) +
                ", more than this machine's " + gigabytes(static_cast<double>(physical_memory_bytes())));
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error& e) {  // "cannot read PATH: why"
    const std::string what = e.what(), prefix = "cannot read " + path + ": ";
    throw Error("task text: cannot read the text file " + path + ": " +
                (what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what));
  }
  if (text.empty()) throw Error("task text: the text file " + path + " is empty");
  return text;
}

Tokenizer make_tokenizer(const TextOptions& o, const std::string& train_text) {
  if (o.tokenizer.empty()) {
    try {
      return Tokenizer::train(train_text, o.vocab_size);
    } catch (const Error& e) {  // "tokenizer: why"
      const std::string what = e.what(), prefix = "tokenizer: ";
      throw Error("task text: the training split of " + o.path + " cannot make a BPE vocabulary: " +
                  (what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what));
    }
  }
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

std::vector<std::string> split_documents(const std::string& text, const std::string& documents) {
  if (documents != "lines" && documents != "paragraphs")
    throw Error("task text: documents must be none, lines or paragraphs (got '" + documents + "')");
  std::vector<std::string> out;
  std::string current;
  const auto blank = [](const std::string& line) {
    return line.find_first_not_of(" \t\r\n") == std::string::npos;
  };
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    end = end == std::string::npos ? text.size() : end + 1;
    const std::string line = text.substr(begin, end - begin);
    begin = end;
    if (blank(line)) {  // ends a paragraph; a blank line is no document
      if (!current.empty()) out.push_back(std::move(current));
      current.clear();
      continue;
    }
    if (documents == "lines") {
      out.push_back(line);
    } else {
      current += line;
    }
  }
  if (!current.empty()) out.push_back(std::move(current));
  return out;
}

Batch document_rows(const std::vector<std::vector<int64_t>>& documents, int64_t seq_len, bool pack,
                    std::vector<int64_t>& lengths) {
  // Pieces of at most seq_len + 1 tokens: inputs piece[:-1], targets piece[1:].
  struct Piece {
    const int64_t* tokens;
    int64_t length;  // inputs (= targets) of the piece, 1..seq_len
  };
  std::vector<Piece> pieces;
  for (const auto& d : documents) {
    const auto n = static_cast<int64_t>(d.size());
    for (int64_t s = 0; s + 1 < n; s += seq_len) pieces.push_back({d.data() + s, std::min(seq_len, n - 1 - s)});
  }
  // Rows as lists of pieces: one each, or first-fit (every piece into the first row with room for it whole).
  std::vector<std::vector<size_t>> rows;
  lengths.clear();
  for (size_t i = 0; i < pieces.size(); ++i) {
    size_t r = rows.size();
    if (pack)
      for (size_t j = 0; j < rows.size(); ++j)
        if (lengths[j] + pieces[i].length <= seq_len) {
          r = j;
          break;
        }
    if (r == rows.size()) {
      rows.emplace_back();
      lengths.push_back(0);
    }
    rows[r].push_back(i);
    lengths[r] += pieces[i].length;
  }
  const auto R = static_cast<int64_t>(rows.size());
  auto inputs = at::zeros({R, seq_len}, at::kLong), targets = at::full({R, seq_len}, kIgnoreIndex, at::kLong);
  auto starts = at::zeros({R, seq_len}, at::kBool);
  auto* x = inputs.data_ptr<int64_t>();
  auto* y = targets.data_ptr<int64_t>();
  auto* first = starts.data_ptr<bool>();
  for (int64_t r = 0; r < R; ++r) {
    int64_t t = r * seq_len;
    for (const size_t i : rows[static_cast<size_t>(r)]) {
      first[t] = true;
      std::copy_n(pieces[i].tokens, pieces[i].length, x + t);
      std::copy_n(pieces[i].tokens + 1, pieces[i].length, y + t);
      t += pieces[i].length;
    }
    if (t < (r + 1) * seq_len) first[t] = true;  // the padding is a sequence of its own
  }
  Batch b{inputs, targets};
  if (pack) b.sequence_starts = starts;
  return b;
}

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
  if (o.documents == "none") {
    if (o.pack) throw Error("task text: pack=1 packs documents; choose documents=lines or documents=paragraphs");
    test_ = consecutive_windows(validation_tokens_, o.seq_len, o.num_test);
    return;
  }
  const auto rows_of = [&](const std::string& text, std::vector<int64_t>& lengths, const char* split) {
    std::vector<std::vector<int64_t>> documents;
    for (const std::string& d : split_documents(text, o.documents)) documents.push_back(tokenizer_.encode(d));
    Batch rows = document_rows(documents, o.seq_len, o.pack, lengths);
    if (rows.size() == 0)
      throw Error("task text: the " + std::string(split) + " split of " + o.path + " has no " + o.documents +
                  " of two tokens or more (documents=" + o.documents + ")");
    return rows;
  };
  train_rows_ = rows_of(split.first, train_row_lengths_, "training");
  std::vector<int64_t> test_lengths;
  test_ = rows_of(split.second, test_lengths, "validation");
  if (o.num_test > 0 && o.num_test < test_.size()) test_ = test_.rows(0, o.num_test);
}

int64_t TextTask::train_size() const {
  if (options_.documents != "none") return train_rows_.size();
  return static_cast<int64_t>(train_tokens_.size()) / options_.seq_len;
}

Batch TextTask::train_batch(int64_t batch_index, int64_t batch_size) {
  const int64_t T = options_.seq_len;
  const uint64_t stream = derive_seed(options_.seed, 0x54455854ULL);  // "TEXT"
  if (options_.documents != "none") {
    // Rows drawn at random (deterministic from the seed and the batch index), trimmed to the longest drawn.
    auto indices = at::empty({batch_size}, at::kLong);
    int64_t width = 1;
    for (int64_t i = 0; i < batch_size; ++i) {
      DataRng rng(derive_seed(stream, static_cast<uint64_t>(batch_index * batch_size + i)));
      const int64_t r = rng.below(train_rows_.size());
      indices.data_ptr<int64_t>()[i] = r;
      width = std::max(width, train_row_lengths_[static_cast<size_t>(r)]);
    }
    const Batch b = train_rows_.select(indices);
    return {b.inputs.narrow(1, 0, width).contiguous(), b.targets.narrow(1, 0, width).contiguous(),
            b.sequence_starts.defined() ? b.sequence_starts.narrow(1, 0, width).contiguous() : at::Tensor()};
  }
  const int64_t starts = static_cast<int64_t>(train_tokens_.size()) - T;  // windows need T + 1 tokens
  auto inputs = at::empty({batch_size, T}, at::kLong), targets = at::empty({batch_size, T}, at::kLong);
  auto* x = inputs.data_ptr<int64_t>();
  auto* y = targets.data_ptr<int64_t>();
  for (int64_t i = 0; i < batch_size; ++i) {
    DataRng rng(derive_seed(stream, static_cast<uint64_t>(batch_index * batch_size + i)));
    const auto s = static_cast<size_t>(rng.below(starts));
    std::copy_n(train_tokens_.begin() + static_cast<std::ptrdiff_t>(s), T, x + i * T);
    std::copy_n(train_tokens_.begin() + static_cast<std::ptrdiff_t>(s + 1), T, y + i * T);
  }
  return {inputs, targets};
}

void TextTask::add_metrics(const at::Tensor& outputs, const Batch& batch, MetricSums& sums) const {
  const auto scored = batch.targets != kIgnoreIndex;
  auto right = ((outputs.argmax(-1) == batch.targets) & scored).sum().item<double>();
  sums.add("token_accuracy", right, scored.sum().item<double>());
}

std::vector<std::pair<std::string, std::string>> TextTask::training_defaults() const {
  return {{"train.lr", "1e-3"},       {"train.batch_size", "16"}, {"train.steps", "2000"},
          {"train.warmup", "100"},    {"train.min_lr", "1e-4"},   {"train.grad_clip", "1.0"},
          {"train.eval_every", "200"}, {"train.target", "0"}};
}

std::map<std::string, std::string> TextTask::artifacts() const { return {{"tokenizer.model", tokenizer_.serialized()}}; }

}  // namespace seqmix
