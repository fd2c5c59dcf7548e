#include "seqmix/io/tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <bitset>
#include <cstdio>
#include <regex>

#include "seqmix/io/atomic_file.h"
#include "seqmix/io/error.h"
#include "seqmix/io/plugin.h"
#include "seqmix/io/printable.h"
#include "sentencepiece/backend_api.h"

namespace seqmix {
namespace {

// SentencePiece trains on lines and drops newlines. A model seqmix trains holds the newline itself as a
// user-defined piece, so plain SentencePiece encodes and decodes text with newlines as seqmix does. Models trained
// before (tokenizer format 1) hold a reserved private-use code point, U+E00A, in its place; a model without a "\n"
// piece gets that mapping, which round-trips any text too.
const std::string kNewline = "\n";
const std::string kNewlineFormat1 = "\xEE\x80\x8A";
// SentencePiece writes spaces as U+2581 and decodes every U+2581 back to a space, so a U+2581 of the text
// itself travels as this reserved private-use code point, U+E081 (the fuzzer found the lost character). This is
// the one place seqmix's ids differ from plain SentencePiece's (docs/tasks.md).
const std::string kSpaceMeta = "\xE2\x96\x81";
const std::string kSpaceMetaStandIn = "\xEE\x82\x81";
constexpr const char* kPluginName = "libseqmix_sentencepiece.so";

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from == to) return s;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

// The text as the plugin takes it: U+2581 as its stand-in, newlines as the model's newline piece.
std::string to_plugin_text(const std::string& text, const std::string& newline_piece) {
  return replace_all(replace_all(text, kSpaceMeta, kSpaceMetaStandIn), kNewline, newline_piece);
}

struct Plugin {
  seqmix_sp_train_fn train;
  seqmix_sp_load_fn load;
  seqmix_sp_encode_fn encode;
  seqmix_sp_decode_fn decode;
  seqmix_sp_size_fn size;
  seqmix_sp_has_piece_fn has_piece;
  seqmix_sp_release_fn release;
};

// RTLD_DEEPBIND keeps the plugin's protobuf apart from LibTorch's. A program that links no LibTorch (the
// tokenizer fuzz target) has no second protobuf and may load it plainly. Sanitizer runtimes refuse
// RTLD_DEEPBIND, and without it a LibTorch program aborts on protobuf's version check, so a sanitizer
// build with LibTorch has no tokenizer.
#if defined(SEQMIX_PLUGIN_WITHOUT_DEEPBIND)
constexpr int kPluginFlags = RTLD_NOW | RTLD_LOCAL;
constexpr const char* kPluginUnavailable = nullptr;
#elif defined(SEQMIX_SANITIZED)
constexpr int kPluginFlags = 0;
constexpr const char* kPluginUnavailable =
    "tokenizer: this is a sanitizer build, where the SentencePiece plugin cannot load (sanitizers refuse "
    "RTLD_DEEPBIND, which keeps its protobuf apart from LibTorch's); use a normal build for text tasks";
#else
constexpr int kPluginFlags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
constexpr const char* kPluginUnavailable = nullptr;
#endif

const Plugin& plugin() {
  static Plugin p;
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    if (kPluginUnavailable) {
      failure = kPluginUnavailable;
      return;
    }
    try {
      void* handle = open_plugin("tokenizer", kPluginName, SEQMIX_SENTENCEPIECE_PLUGIN, kPluginFlags);
      auto symbol = [&](const char* name) { return plugin_symbol(handle, "tokenizer", name); };
      p.train = reinterpret_cast<seqmix_sp_train_fn>(symbol("seqmix_sp_train"));
      p.load = reinterpret_cast<seqmix_sp_load_fn>(symbol("seqmix_sp_load"));
      p.encode = reinterpret_cast<seqmix_sp_encode_fn>(symbol("seqmix_sp_encode"));
      p.decode = reinterpret_cast<seqmix_sp_decode_fn>(symbol("seqmix_sp_decode"));
      p.size = reinterpret_cast<seqmix_sp_size_fn>(symbol("seqmix_sp_size"));
      p.has_piece = reinterpret_cast<seqmix_sp_has_piece_fn>(symbol("seqmix_sp_has_piece"));
      p.release = reinterpret_cast<seqmix_sp_release_fn>(symbol("seqmix_sp_release"));
    } catch (const Error& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) throw Error(failure);
  return p;
}

// The plugin's malloc'ed error message, freed, as a string.
std::string take_message(char* error) {
  std::string s = error ? error : "unknown error";
  std::free(error);
  return printable(s);  // SentencePiece's messages may span lines
}

// "12 distinct byte values", or "one byte value, 0x00, repeated" for a text of one repeated byte (a file of NULs).
std::string distinct_bytes(const std::string& text) {
  std::bitset<256> seen;
  for (unsigned char c : text) seen.set(c);
  if (seen.count() == 1) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(text[0]));
    return std::string("one byte value, ") + byte + ", repeated";
  }
  return std::to_string(seen.count()) + " distinct byte values";
}

// SentencePiece's training failure in seqmix's terms: its two vocabulary-size failures name the option to change
// and the bound (its own text advises trainer flags seqmix does not expose); any other loses the source location
// and failed condition SentencePiece prefixes.
std::string training_failure(const std::string& message, int64_t vocab_size, const std::string& text) {
  const std::string size = std::to_string(vocab_size);
  std::smatch m;
  static const std::regex too_high("Vocabulary size too high \\(\\d+\\)\\. Please set it to a value <= (\\d+)");
  if (std::regex_search(message, m, too_high))
    return "tokenizer: this text (" + std::to_string(text.size()) + " bytes, " + distinct_bytes(text) +
           ") yields at most " + m[1].str() + " BPE pieces, fewer than vocab_size=" + size + "; set vocab_size to " +
           m[1].str() + " or less, or train on more varied text";
  static const std::regex too_low("smaller than required_chars\\. \\d+ vs (\\d+)");
  if (std::regex_search(message, m, too_low))
    return "tokenizer: this text needs at least " + m[1].str() + " pieces (one per distinct character, 256 byte "
           "pieces and the special ones), more than vocab_size=" + size + "; set vocab_size to " + m[1].str() +
           " or more";
  static const std::regex location("^\\S+\\.cc\\(\\d+\\) \\[.*?\\] ");
  return "tokenizer: training a BPE vocabulary of " + size + " pieces failed: " + std::regex_replace(message, location, "");
}

}  // namespace

bool Tokenizer::available() { return kPluginUnavailable == nullptr; }

Tokenizer Tokenizer::train(const std::string& text, int64_t vocab_size) {
  if (text.empty()) throw Error("tokenizer: cannot train on an empty text");
  const std::string mapped = to_plugin_text(text, kNewline);
  char *model = nullptr, *error = nullptr;
  size_t model_len = 0;
  if (plugin().train(mapped.data(), mapped.size(), vocab_size, kNewline.c_str(), &model, &model_len, &error) != 0)
    throw Error(training_failure(take_message(error), vocab_size, text));
  std::string serialized(model, model_len);
  std::free(model);
  return from_serialized(serialized, "the trained model");
}

Tokenizer Tokenizer::load(const std::string& path) { return from_serialized(read_file(path), path); }

Tokenizer Tokenizer::from_serialized(const std::string& model_proto, const std::string& origin) {
  const Plugin& p = plugin();
  void* handle = nullptr;
  char* error = nullptr;
  if (p.load(model_proto.data(), model_proto.size(), &handle, &error) != 0)
    throw Error("tokenizer: " + origin + " is not a SentencePiece model (" + take_message(error) + ")");
  Tokenizer t;
  t.processor_ = std::shared_ptr<void>(handle, p.release);
  t.serialized_ = model_proto;
  t.newline_piece_ = p.has_piece(handle, kNewline.data(), kNewline.size()) ? kNewline : kNewlineFormat1;
  return t;
}

std::vector<int64_t> Tokenizer::encode(const std::string& text) const {
  const std::string mapped = to_plugin_text(text, newline_piece_);
  int32_t* ids = nullptr;
  size_t count = 0;
  char* error = nullptr;
  if (plugin().encode(processor_.get(), mapped.data(), mapped.size(), &ids, &count, &error) != 0)
    throw Error("tokenizer: cannot encode the text: " + take_message(error));
  std::vector<int64_t> out(ids, ids + count);
  std::free(ids);
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  const int64_t V = vocab_size();
  std::vector<int32_t> narrow;
  narrow.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id >= V)
      throw Error("tokenizer: token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
    narrow.push_back(static_cast<int32_t>(id));
  }
  char *text = nullptr, *error = nullptr;
  size_t text_len = 0;
  if (plugin().decode(processor_.get(), narrow.data(), narrow.size(), &text, &text_len, &error) != 0)
    throw Error("tokenizer: cannot decode: " + take_message(error));
  std::string out(text, text_len);
  std::free(text);
  return replace_all(replace_all(out, newline_piece_, kNewline), kSpaceMetaStandIn, kSpaceMeta);
}

int64_t Tokenizer::vocab_size() const { return plugin().size(processor_.get()); }

void Tokenizer::save(const std::string& path) const { write_file_atomically(path, serialized_); }

}  // namespace seqmix
