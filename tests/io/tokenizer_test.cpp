// The BPE tokenizer: exact round trips (spaces, newlines, unseen characters), determinism, merges that
// shorten text, and clear errors for bad ids and files that are not models.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "seqmix/io/error.h"
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
  const Tokenizer t = Tokenizer::train(corpus(), 400);
  EXPECT_EQ(t.vocab_size(), 400);
  for (const std::string s : {std::string("First Citizen:\nSpeak, speak.\n\n"), std::string("  leading and  double  spaces "),
                              std::string("\n\n\n"), std::string("digits 0123456789 and tabs\tend")}) {
    EXPECT_EQ(t.decode(t.encode(s)), s);
  }
}

TEST(Tokenizer, UnseenCharactersFallBackToBytes) {
  const Tokenizer t = Tokenizer::train(corpus(), 400);
  const std::string s = "na\xC3\xAFve \xE2\x9C\x93 caf\xC3\xA9\n";  // "naïve ✓ café"
  EXPECT_EQ(t.decode(t.encode(s)), s);
}

TEST(Tokenizer, MergesMakeFrequentTextShorterThanItsCharacters) {
  const Tokenizer t = Tokenizer::train(corpus(), 400);
  const std::string s = "Before we proceed any further, hear me speak.\n";
  EXPECT_LT(t.encode(s).size() * 3, s.size());  // the corpus repeats this line: a few pieces
}

TEST(Tokenizer, TrainingIsDeterministicAndSavedModelsLoadTheSame) {
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

}  // namespace
}  // namespace seqmix
