#include "seqmix/io/tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "seqmix/io/atomic_file.h"
#include "seqmix/io/error.h"
#include "sentencepiece/backend_api.h"

namespace seqmix {
namespace {

// SentencePiece trains on lines and drops newlines; seqmix keeps them as this one reserved piece
// (a private-use code point, U+E00A, which real text does not contain).
const std::string kNewlinePiece = "\xEE\x80\x8A";
constexpr const char* kPluginName = "libseqmix_sentencepiece.so";

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

struct Plugin {
  seqmix_sp_train_fn train;
  seqmix_sp_load_fn load;
  seqmix_sp_encode_fn encode;
  seqmix_sp_decode_fn decode;
  seqmix_sp_size_fn size;
  seqmix_sp_release_fn release;
};

// The plugin next to the running program (the seqmix binary), else where the build put it.
std::vector<std::string> plugin_candidates() {
  std::vector<std::string> out;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) out.push_back((exe.parent_path() / kPluginName).string());
  out.push_back(SEQMIX_SENTENCEPIECE_PLUGIN);
  return out;
}

const Plugin& plugin() {
  static Plugin p;
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    void* handle = nullptr;
    std::string tried;
    for (const auto& path : plugin_candidates()) {
      if (!std::filesystem::exists(path)) continue;
      handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (handle) break;
      tried += std::string(" ") + dlerror();
    }
    if (!handle) {
      failure = std::string("tokenizer: cannot load the SentencePiece plugin ") + kPluginName + " (looked next to the program and in " +
                SEQMIX_SENTENCEPIECE_PLUGIN + ")" + tried;
      return;
    }
    auto symbol = [&](const char* name) {
      void* f = dlsym(handle, name);
      if (!f && failure.empty()) failure = std::string("tokenizer: the SentencePiece plugin lacks ") + name;
      return f;
    };
    p.train = reinterpret_cast<seqmix_sp_train_fn>(symbol("seqmix_sp_train"));
    p.load = reinterpret_cast<seqmix_sp_load_fn>(symbol("seqmix_sp_load"));
    p.encode = reinterpret_cast<seqmix_sp_encode_fn>(symbol("seqmix_sp_encode"));
    p.decode = reinterpret_cast<seqmix_sp_decode_fn>(symbol("seqmix_sp_decode"));
    p.size = reinterpret_cast<seqmix_sp_size_fn>(symbol("seqmix_sp_size"));
    p.release = reinterpret_cast<seqmix_sp_release_fn>(symbol("seqmix_sp_release"));
  });
  if (!failure.empty()) throw Error(failure);
  return p;
}

// The plugin's malloc'ed error message, freed, as a string.
std::string take_message(char* error) {
  std::string s = error ? error : "unknown error";
  std::free(error);
  return s;
}

}  // namespace

Tokenizer Tokenizer::train(const std::string& text, int64_t vocab_size) {
  if (text.empty()) throw Error("tokenizer: cannot train on an empty text");
  const std::string mapped = replace_all(text, "\n", kNewlinePiece);
  char *model = nullptr, *error = nullptr;
  size_t model_len = 0;
  if (plugin().train(mapped.data(), mapped.size(), vocab_size, kNewlinePiece.c_str(), &model, &model_len, &error) != 0)
    throw Error("tokenizer: training a BPE vocabulary of " + std::to_string(vocab_size) +
                " pieces failed: " + take_message(error));
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
  return t;
}

std::vector<int64_t> Tokenizer::encode(const std::string& text) const {
  const std::string mapped = replace_all(text, "\n", kNewlinePiece);
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
  return replace_all(out, kNewlinePiece, "\n");
}

int64_t Tokenizer::vocab_size() const { return plugin().size(processor_.get()); }

void Tokenizer::save(const std::string& path) const { write_file_atomically(path, serialized_); }

}  // namespace seqmix
