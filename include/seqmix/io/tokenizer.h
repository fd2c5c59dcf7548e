#pragma once
// A byte-pair-encoding subword tokenizer (SentencePiece's BPE), trained by seqmix on a text or loaded
// from a SentencePiece .model file. Text round-trips exactly: no normalisation, spaces kept as they are,
// newlines kept as one user-defined piece "\n" (models from before: a reserved piece, U+E00A, in its place), and
// characters the training text never showed fall back to their UTF-8 bytes. Plain SentencePiece
// (sentencepiece.SentencePieceProcessor in Python) gives the same ids for any text without U+2581, SentencePiece's
// space mark, which seqmix carries as U+E081 (docs/tasks.md). SentencePiece runs in a plugin,
// libseqmix_sentencepiece.so, loaded on first use (src/io/sentencepiece/backend_api.h says why).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace seqmix {

class Tokenizer {
 public:
  // False in a sanitizer build, where the plugin cannot load (every call then throws Error saying so).
  static bool available();
  // Trains a BPE vocabulary of vocab_size pieces (special and byte pieces included) on text.
  // Deterministic: the same text and size give the same model.
  static Tokenizer train(const std::string& text, int64_t vocab_size);
  // Reads a model written by save() (or any SentencePiece model); throws Error if it is not one.
  static Tokenizer load(const std::string& path);
  static Tokenizer from_serialized(const std::string& model_proto, const std::string& origin);

  std::vector<int64_t> encode(const std::string& text) const;
  // Ids outside [0, vocab_size) are an error.
  std::string decode(const std::vector<int64_t>& ids) const;
  int64_t vocab_size() const;
  // The SentencePiece model proto, as save() writes it.
  const std::string& serialized() const { return serialized_; }
  void save(const std::string& path) const;  // atomically

 private:
  Tokenizer() = default;
  std::shared_ptr<void> processor_;  // the plugin's processor
  std::string serialized_;
  std::string newline_piece_;  // the piece a newline of the text becomes: "\n", or U+E00A in models from before
};

}  // namespace seqmix
