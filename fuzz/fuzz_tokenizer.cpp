// Fuzzes the tokenizer's input: text to encode with a trained BPE model (first byte 0 mod 3), token ids
// to decode (1 mod 3) and bytes loaded as a model file, as a run's tokenizer.model is (2 mod 3). Valid
// UTF-8 text round-trips exactly, ids stay in the vocabulary, and anything else gives a one-line Error.
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "fuzz_support.h"
#include "seqmix/io/printable.h"
#include "seqmix/io/tokenizer.h"

using namespace seqmix;

namespace {

// Reserved by the tokenizer: its stand-ins for '\n' and for U+2581 (src/io/tokenizer.cpp).
const char kNewlinePiece[] = "\xEE\x80\x8A";
const char kSpaceMetaStandIn[] = "\xEE\x82\x81";

const Tokenizer& trained() {
  static const Tokenizer t = [] {
    std::string text;
    for (int i = 0; i < 200; ++i)
      text += "ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet is the sun " +
              std::to_string(i) + ".\nJULIET: O Romeo, Romeo! wherefore art thou Romeo?\n";
    return Tokenizer::train(text, 400);
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // SEQMIX_FUZZ_WRITE_SEEDS=DIR writes the model seed (kept in fuzz/corpus/fuzz_tokenizer).
  if (const char* dir = std::getenv("SEQMIX_FUZZ_WRITE_SEEDS"))
    std::ofstream(std::string(dir) + "/model.seed", std::ios::binary) << '\2' << trained().serialized();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string input = fuzz::as_string(data + 1, size - 1);
  const Tokenizer& t = trained();
  try {
    switch (data[0] % 3) {
      case 0: {
        const auto ids = t.encode(input);
        for (int64_t id : ids) fuzz::require(id >= 0 && id < t.vocab_size(), "encode gave an id outside the vocabulary");
        if (valid_utf8(input) && input.find(kNewlinePiece) == std::string::npos &&
            input.find(kSpaceMetaStandIn) == std::string::npos)
          fuzz::require(t.decode(ids) == input, "valid UTF-8 text does not round-trip");
        break;
      }
      case 1: {
        std::vector<int64_t> ids(input.size() / 4);
        for (size_t i = 0; i < ids.size(); ++i) {
          int32_t id;
          std::memcpy(&id, input.data() + 4 * i, 4);
          ids[i] = id;
        }
        t.decode(ids);
        break;
      }
      default: {
        const Tokenizer loaded = Tokenizer::from_serialized(input, "fuzz tokenizer.model");
        fuzz::require(loaded.vocab_size() > 0, "a loaded model has no vocabulary");
        loaded.decode(loaded.encode("ROMEO: soft!\nJULIET: hark."));
      }
    }
  } catch (const Error& e) {
    fuzz::require_one_line(e);
  }
  return 0;
}
