// The BPE tokenizer: exact round trips (spaces, newlines, unseen characters), determinism, merges that
// shorten text, and clear errors for bad ids and files that are not models.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "seqmix/io/error.h"
#include "support/skip_without_tokenizer.h"
#include "seqmix/io/tokenizer.h"

namespace seqmix {
namespace {

// A small corpus with repeated words (so BPE has merges to learn), digits, punctuation, runs of spaces
// and blank lines.
std::string corpus() {
  std::string text;
  const char* lines[] = {"First Citizen:", "Before we proceed any further, hear me speak.", "",
                         "All:  Speak, speak.", "  You are all resolved rather to die than to famish?",
                         "Act 1, scene 23: 4567 ducats."};
  for (int i = 0; i < 60; ++i)
    for (const char* line : lines) text += std::string(line) + "\n";
  return text;
}

TEST(Tokenizer, RoundTripsTextExactly) {
  SKIP_WITHOUT_TOKENIZER();
  const Tokenizer t = Tokenizer::train(corpus(), 400);
  EXPECT_EQ(t.vocab_size(), 400);
  for (const std::string s : {std::string("First Citizen:\nSpeak, speak.\n\n"), std::string("  leading and  double  spaces "),
                              std::string("\n\n\n"), std::string("digits 0123456789 and tabs\tend")}) {
    EXPECT_EQ(t.decode(t.encode(s)), s);
  }
}

TEST(Tokenizer, UnseenCharactersFallBackToBytes) {
  SKIP_WITHOUT_TOKENIZER();
  const Tokenizer t = Tokenizer::train(corpus(), 400);
  const std::string s = "na\xC3\xAFve \xE2\x9C\x93 caf\xC3\xA9\n";  // "naïve ✓ café"
  EXPECT_EQ(t.decode(t.encode(s)), s);
}

TEST(Tokenizer, MergesMakeFrequentTextShorterThanItsCharacters) {
  SKIP_WITHOUT_TOKENIZER();
  const Tokenizer t = Tokenizer::train(corpus(), 400);
  const std::string s = "Before we proceed any further, hear me speak.\n";
  EXPECT_LT(t.encode(s).size() * 3, s.size());  // the corpus repeats this line: a few pieces
}

TEST(Tokenizer, TrainingIsDeterministicAndSavedModelsLoadTheSame) {
  SKIP_WITHOUT_TOKENIZER();
  const Tokenizer a = Tokenizer::train(corpus(), 400), b = Tokenizer::train(corpus(), 400);
  EXPECT_EQ(a.serialized(), b.serialized());
  const auto path = std::filesystem::temp_directory_path() / ("seqmix-tok-" + std::to_string(::getpid()) + ".model");
  a.save(path.string());
  const Tokenizer c = Tokenizer::load(path.string());
  const std::string s = "You are all resolved rather to die?\n";
  EXPECT_EQ(c.encode(s), a.encode(s));
  std::filesystem::remove(path);
}

TEST(Tokenizer, BadInputGivesClearErrors) {
  SKIP_WITHOUT_TOKENIZER();
  const Tokenizer t = Tokenizer::train(corpus(), 400);
  try {
    t.decode({1, 400});
    FAIL() << "an id outside the vocabulary must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 400 is outside the vocabulary [0, 400)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.decode({-1}), Error);
  EXPECT_THROW(Tokenizer::train("", 400), Error);
  EXPECT_THROW(Tokenizer::train(corpus(), 100), Error);  // fewer pieces than bytes and characters need
  const auto path = std::filesystem::temp_directory_path() / ("seqmix-notamodel-" + std::to_string(::getpid()));
  std::ofstream(path) << "this is not a model";
  try {
    Tokenizer::load(path.string());
    FAIL() << "a file that is not a model must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a SentencePiece model"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
  EXPECT_THROW(Tokenizer::load(path.string()), Error);  // absent
}

// Found by fuzz/fuzz_tokenizer.cpp: SentencePiece decodes its space mark U+2581 as a space, so a U+2581 of
// the text itself came back as ' '. It now travels as a reserved stand-in and round-trips.
TEST(Tokenizer, TheSpaceMarkCharacterRoundTrips) {
  SKIP_WITHOUT_TOKENIZER();
  const Tokenizer t = Tokenizer::train(corpus(), 400);
  for (const std::string s : {std::string("a\xE2\x96\x81" "b"), std::string("\xE2\x96\x81\xE2\x96\x81 \xE2\x96\x81\n")})
    EXPECT_EQ(t.decode(t.encode(s)), s);
}

// Found by fuzz/fuzz_tokenizer.cpp: a damaged model file made SentencePiece quote a piece holding a
// newline, and the error spanned two lines.
TEST(Tokenizer, ADamagedModelIsAOneLineError) {
  SKIP_WITHOUT_TOKENIZER();
  const std::string path =
      (std::filesystem::path(__FILE__).parent_path().parent_path() / "data/tokenizer_model_newline_in_error.model").string();
  try {
    Tokenizer::load(path);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("is not a SentencePiece model"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace seqmix
