// libseqmix_sentencepiece.so: SentencePiece's BPE trainer and processor behind the C interface of
// backend_api.h (see there why it is a plugin). Built without LibTorch.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend_api.h"

namespace {

// Training sentences are chunks of whole lines under SentencePiece's sentence limit (4192 bytes).
constexpr size_t kChunkBytes = 2048;

char* copy_out(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

int fail(char** error, const std::string& message) {
  *error = copy_out(message);
  return 1;
}

// The training text as chunks of whole lines (a line longer than a chunk is cut, since SentencePiece would
// drop the whole sentence).
class LineChunks : public sentencepiece::SentenceIterator {
 public:
  LineChunks(const std::string& text, const std::string& newline_piece) : text_(text), newline_piece_(newline_piece) {
    Next();
  }
  bool done() const override { return done_; }
  void Next() override {
    current_.clear();
    while (cursor_ < text_.size() && current_.size() < kChunkBytes) {
      size_t end = text_.find(newline_piece_, cursor_);
      const bool newline = end != std::string::npos;
      if (!newline) end = text_.size();
      if (end - cursor_ > kChunkBytes) {
        current_ += text_.substr(cursor_, kChunkBytes);
        cursor_ += kChunkBytes;
        break;
      }
      current_ += text_.substr(cursor_, end - cursor_);
      if (newline) current_ += newline_piece_;
      cursor_ = newline ? end + newline_piece_.size() : end;
    }
    done_ = current_.empty();
  }
  const std::string& value() const override { return current_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::string& text_;
  const std::string newline_piece_;
  size_t cursor_ = 0;
  std::string current_;
  bool done_ = false;
};

}  // namespace

extern "C" {

int seqmix_sp_train(const char* text, size_t text_len, int64_t vocab_size, const char* newline_piece, char** model,
                    size_t* model_len, char** error) {
  try {
    const std::string corpus(text, text_len);
    const std::unordered_map<std::string, std::string> args = {
        {"model_type", "bpe"},
        {"vocab_size", std::to_string(vocab_size)},
        {"character_coverage", "1.0"},
        {"byte_fallback", "true"},
        {"normalization_rule_name", "identity"},
        {"remove_extra_whitespaces", "false"},
        {"add_dummy_prefix", "false"},
        {"split_digits", "true"},
        {"max_sentencepiece_length", "16"},
        {"user_defined_symbols", newline_piece},
        {"bos_id", "-1"},
        {"eos_id", "-1"},
        {"unk_id", "0"},
        {"num_threads", "1"},  // one thread: the same model on every machine
        {"input_sentence_size", "0"},
        {"minloglevel", "2"},
    };
    LineChunks chunks(corpus, newline_piece);
    std::string serialized;
    const auto status = sentencepiece::SentencePieceTrainer::Train(args, &chunks, &serialized);
    if (!status.ok()) return fail(error, status.message());
    *model_len = serialized.size();
    *model = static_cast<char*>(std::malloc(serialized.size()));
    if (!*model) return fail(error, "out of memory");
    std::memcpy(*model, serialized.data(), serialized.size());
    return 0;
  } catch (const std::exception& e) {
    return fail(error, e.what());
  }
}

int seqmix_sp_load(const char* model, size_t model_len, void** handle, char** error) {
  try {
    // Owned until handed out: SentencePiece may throw from inside the load (the fuzzer found the leak).
    auto p = std::make_unique<sentencepiece::SentencePieceProcessor>();
    const auto status = p->LoadFromSerializedProto(std::string(model, model_len));
    if (!status.ok()) return fail(error, status.message());
    *handle = p.release();
    return 0;
  } catch (const std::exception& e) {
    return fail(error, e.what());
  }
}

int seqmix_sp_encode(void* handle, const char* text, size_t text_len, int32_t** ids, size_t* count, char** error) {
  try {
    std::vector<int> out;
    const auto status = static_cast<sentencepiece::SentencePieceProcessor*>(handle)->Encode(std::string(text, text_len), &out);
    if (!status.ok()) return fail(error, status.message());
    *count = out.size();
    *ids = static_cast<int32_t*>(std::malloc(std::max<size_t>(out.size(), 1) * sizeof(int32_t)));
    if (!*ids) return fail(error, "out of memory");
    for (size_t i = 0; i < out.size(); ++i) (*ids)[i] = out[i];
    return 0;
  } catch (const std::exception& e) {
    return fail(error, e.what());
  }
}

int seqmix_sp_decode(void* handle, const int32_t* ids, size_t count, char** text, size_t* text_len, char** error) {
  try {
    std::string out;
    const auto status =
        static_cast<sentencepiece::SentencePieceProcessor*>(handle)->Decode(std::vector<int>(ids, ids + count), &out);
    if (!status.ok()) return fail(error, status.message());
    *text_len = out.size();
    *text = copy_out(out);
    if (!*text) return fail(error, "out of memory");
    return 0;
  } catch (const std::exception& e) {
    return fail(error, e.what());
  }
}

int64_t seqmix_sp_size(void* handle) { return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->GetPieceSize(); }

int seqmix_sp_has_piece(void* handle, const char* piece, size_t piece_len) {
  const auto* p = static_cast<sentencepiece::SentencePieceProcessor*>(handle);
  const std::string text(piece, piece_len);
  const int id = p->PieceToId(text);
  return !p->IsUnknown(id) && p->IdToPiece(id) == text ? 1 : 0;
}

void seqmix_sp_release(void* handle) { delete static_cast<sentencepiece::SentencePieceProcessor*>(handle); }
}
