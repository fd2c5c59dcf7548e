// The text language-modelling task: the split, training windows, the validation windows, errors, and a
// small model that learns a text's structure.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "seqmix/io/config.h"
#include "seqmix/io/error.h"
#include "support/skip_without_tokenizer.h"
#include "seqmix/tasks/text_lm.h"
#include "seqmix/train/run.h"
#include "support/test_support.h"

namespace seqmix {
namespace {
namespace fs = std::filesystem;

// A text whose lines follow a fixed pattern with a counter in them: learnable, not trivial.
std::string patterned_text(int lines) {
  const char* names[] = {"Romeo", "Juliet", "Mercutio", "Tybalt"};
  std::string text;
  for (int i = 0; i < lines; ++i)
    text += std::string(names[i % 4]) + ": the " + std::to_string(i % 7) + " of night is come.\n";
  return text;
}

fs::path write_text(const std::string& name, const std::string& text) {
  const auto dir = fs::temp_directory_path() / ("seqmix-text-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / name) << text;
  return dir / name;
}

TextOptions options(const fs::path& path, int64_t seq_len = 16) {
  TextOptions o;
  o.path = path.string();
  o.seq_len = seq_len;
  o.vocab_size = 320;
  return o;
}

TEST(Text, SplitCutsAtTheLineEndAfterTheTrainingShare) {
  SKIP_WITHOUT_TOKENIZER();
  const auto [train, val] = split_text("aaaa\nbbbb\ncccc\ndddd\n", 0.5);  // 20 bytes: byte 10 starts "cccc"
  EXPECT_EQ(train, "aaaa\nbbbb\ncccc\n");
  EXPECT_EQ(val, "dddd\n");
  EXPECT_EQ(split_text("no newline at all", 0.5).second, "");
  EXPECT_THROW(split_text("x", 0.0), Error);
  EXPECT_THROW(split_text("x", 1.0), Error);
}

TEST(Text, TrainingWindowsAreShiftedSlicesOfTheTrainingTokens) {
  SKIP_WITHOUT_TOKENIZER();
  TextTask task(options(write_text("a.txt", patterned_text(400))), "text");
  const auto& tokens = task.train_tokens();
  Batch b = task.train_batch(3, 5);
  ASSERT_EQ(b.inputs.sizes(), (std::vector<int64_t>{5, 16}));
  ASSERT_EQ(b.targets.sizes(), (std::vector<int64_t>{5, 16}));
  for (int64_t i = 0; i < 5; ++i) {
    auto x = b.inputs[i].contiguous();
    const int64_t* row = x.data_ptr<int64_t>();
    // The row is a contiguous slice of the training tokens, and the targets are the next tokens.
    auto at = std::search(tokens.begin(), tokens.end(), row, row + 16);
    ASSERT_NE(at, tokens.end());
    const auto s = at - tokens.begin();
    for (int64_t t = 0; t < 16; ++t) EXPECT_EQ(b.targets[i][t].item<int64_t>(), tokens[static_cast<size_t>(s + t + 1)]);
  }
  TextTask again(options(write_text("a.txt", patterned_text(400))), "text");
  EXPECT_TRUE(torch::equal(again.train_batch(3, 5).inputs, b.inputs));  // the same batch from the same seed
  EXPECT_FALSE(torch::equal(task.train_batch(4, 5).inputs, b.inputs));
}

TEST(Text, TheTestSetIsTheValidationTokensInConsecutiveWindows) {
  SKIP_WITHOUT_TOKENIZER();
  TextTask task(options(write_text("b.txt", patterned_text(400))), "text");
  const auto& val = task.validation_tokens();
  const Batch& test = task.test_set();
  const int64_t n = (static_cast<int64_t>(val.size()) - 1) / 16;
  ASSERT_EQ(test.size(), n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < 16; ++t) {
      EXPECT_EQ(test.inputs[i][t].item<int64_t>(), val[static_cast<size_t>(i * 16 + t)]);
      EXPECT_EQ(test.targets[i][t].item<int64_t>(), val[static_cast<size_t>(i * 16 + t + 1)]);
    }
  auto o = options(write_text("b.txt", patterned_text(400)));
  o.num_test = 2;
  EXPECT_EQ(TextTask(o, "text").test_set().size(), 2);
  // The tokenizer saw only the training split, and both splits decode back to the file.
  const auto [train_text, val_text] = split_text(patterned_text(400), 0.1);
  EXPECT_EQ(task.tokenizer().decode(task.train_tokens()), train_text);
  EXPECT_EQ(task.tokenizer().decode(val), val_text);
}

TEST(Text, AGivenTokenizerIsUsedAndMustMatchVocabSize) {
  SKIP_WITHOUT_TOKENIZER();
  const auto path = write_text("c.txt", patterned_text(400));
  TextTask trained(options(path), "text");
  const auto model = path.parent_path() / "tok.model";
  trained.tokenizer().save(model.string());
  auto o = options(path);
  o.tokenizer = model.string();
  TextTask loaded(o, "text");
  EXPECT_EQ(loaded.train_tokens(), trained.train_tokens());
  EXPECT_EQ(loaded.artifacts().at("tokenizer.model"), trained.tokenizer().serialized());
  o.vocab_size = 512;
  try {
    TextTask mismatch(o, "text");
    FAIL() << "a vocab_size that disagrees with the tokenizer must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocab_size=512 disagrees with the tokenizer"), std::string::npos) << e.what();
  }
}

TEST(Text, BadFilesGiveClearErrors) {
  SKIP_WITHOUT_TOKENIZER();
  auto expect_error = [](const TextOptions& o, const std::string& part) {
    try {
      TextTask task(o, "text");
      ADD_FAILURE() << "expected an error containing '" << part << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error(options("/nonexistent/seqmix.txt"), "cannot read the text file /nonexistent/seqmix.txt");
  expect_error(options(write_text("empty.txt", "")), "is empty");
  expect_error(options(write_text("short.txt", patterned_text(3)), 64), "fewer than seq_len");
}

TEST(Text, RegistryBuildsTheTaskFromASpec) {
  SKIP_WITHOUT_TOKENIZER();
  const auto path = write_text("d.txt", patterned_text(400));
  auto task = build_task("text:path=" + path.string() + ",seq_len=16,vocab_size=320");
  EXPECT_EQ(task->vocab_size(), 320);
  EXPECT_EQ(task->seq_len(), 16);
  EXPECT_EQ(task->primary_metric(), "loss");
  EXPECT_FALSE(task->higher_is_better());
}

TEST(Text, DocumentsAreNonEmptyLinesOrBlocksBetweenBlankLines) {
  const std::string text = "a b\nc\n\n  \nd\n\ne";
  EXPECT_EQ(split_documents(text, "lines"), (std::vector<std::string>{"a b\n", "c\n", "d\n", "e"}));
  EXPECT_EQ(split_documents(text, "paragraphs"), (std::vector<std::string>{"a b\nc\n", "d\n", "e"}));
  EXPECT_THROW(split_documents(text, "pages"), Error);
}

// Documents of 3, 2, 1 and 6 tokens in rows of 4: pieces [1 2 3], [4 5], [7 8 9 10 11], [11 12] (the one-token
// document predicts nothing; the long one is cut with its cut token in both pieces).
TEST(Text, DocumentRowsHoldOnePieceEachOrPackThemFirstFit) {
  const std::vector<std::vector<int64_t>> documents{{1, 2, 3}, {4, 5}, {6}, {7, 8, 9, 10, 11, 12}};
  const int64_t I = kIgnoreIndex;
  const auto rows_of = [](std::vector<int64_t> v, int64_t width) {
    return torch::tensor(v, torch::kLong).view({-1, width});
  };
  std::vector<int64_t> lengths;
  const Batch rows = document_rows(documents, 4, false, lengths);
  EXPECT_EQ(lengths, (std::vector<int64_t>{2, 1, 4, 1}));
  EXPECT_FALSE(rows.sequence_starts.defined());
  EXPECT_TRUE(torch::equal(rows.inputs, rows_of({1, 2, 0, 0, 4, 0, 0, 0, 7, 8, 9, 10, 11, 0, 0, 0}, 4)));
  EXPECT_TRUE(torch::equal(rows.targets, rows_of({2, 3, I, I, 5, I, I, I, 8, 9, 10, 11, 12, I, I, I}, 4)));
  const Batch packed = document_rows(documents, 4, true, lengths);
  EXPECT_EQ(lengths, (std::vector<int64_t>{4, 4}));
  EXPECT_TRUE(torch::equal(packed.inputs, rows_of({1, 2, 4, 11, 7, 8, 9, 10}, 4)));
  EXPECT_TRUE(torch::equal(packed.targets, rows_of({2, 3, 5, 12, 8, 9, 10, 11}, 4)));
  EXPECT_TRUE(torch::equal(packed.sequence_starts,
                           rows_of({1, 0, 1, 1, 1, 0, 0, 0}, 4).to(torch::kBool)));
}

std::string patterned_paragraphs(int lines) {
  std::string text;
  for (int i = 0; i < lines; ++i) text += patterned_text(i % 3 + 1) + "\n";  // 1-3 lines, blank line
  return text;
}

TEST(Text, PackedBatchesAreFullRowsOfWholeDocuments) {
  SKIP_WITHOUT_TOKENIZER();
  const auto path = write_text("p.txt", patterned_paragraphs(300));
  auto padded = build_task("text:path=" + path.string() + ",seq_len=96,vocab_size=320,documents=paragraphs");
  auto packed = build_task("text:path=" + path.string() + ",seq_len=96,vocab_size=320,documents=paragraphs,pack=1");
  const Batch a = padded->train_batch(2, 8), b = packed->train_batch(2, 8);
  EXPECT_FALSE(a.sequence_starts.defined());
  EXPECT_LT(a.inputs.size(1), 96) << "padded to the batch's longest paragraph, not to seq_len";
  ASSERT_TRUE(b.sequence_starts.defined());
  EXPECT_EQ(b.inputs.size(0), 8);
  EXPECT_LE(b.inputs.size(1), 96);
  EXPECT_EQ(b.inputs.sizes(), b.sequence_starts.sizes());
  EXPECT_GT(b.sequence_starts.sum().item<int64_t>(), 8 * 2) << "several paragraphs per row";
  // Packing leaves less than one paragraph of padding per row: far more targets per position than padding.
  const auto share = [](const Batch& x) { return (x.targets != kIgnoreIndex).sum().item<double>() / x.targets.numel(); };
  EXPECT_GT(share(b), 0.8);
  EXPECT_GT(share(b), share(a));
  EXPECT_LT(packed->train_size(), padded->train_size());
  EXPECT_TRUE(packed->test_set().sequence_starts.defined());
  EXPECT_THROW(build_task("text:path=" + path.string() + ",seq_len=96,vocab_size=320,pack=1"), Error);
}

// The validation loss of a one-block softmax model trained 300 steps on the text task `task_options` of `text`.
double trained_loss(const std::string& file, const std::string& text, const std::string& task_options) {
  const auto path = write_text(file, text);
  Config config(run_config_schema());
  config.set("task", "text:path=" + path.string() + ",seq_len=32,vocab_size=320" + task_options, "test");
  config.set("mixer", "softmax:heads=2", "test");
  config.set("model", "lm:dim=32,layers=1", "test");
  for (const char* o : {"train.steps=300", "train.lr=0.005", "train.warmup=20", "train.eval_every=0", "threads=1"})
    config.apply_override(o);
  seqmix::Run run = build_run(config, "");
  run.train.quiet = true;
  return train(*run.model, *run.task, run.train).final_metrics.at("loss");
}

// Packed paragraphs train as well as the stream: the model reads each paragraph from its start.
TEST(Text, ASmallModelLearnsPackedParagraphs) {
  SKIP_WITHOUT_TOKENIZER();
  EXPECT_LT(trained_loss("q.txt", patterned_paragraphs(400), ",documents=paragraphs,pack=1"), 1.0)
      << "uniform guessing scores ln(320) = 5.77";
}

// A one-block model learns the pattern: validation loss falls far below that of a uniform guess.
TEST(Text, ASmallModelLearnsThePatternedText) {
  SKIP_WITHOUT_TOKENIZER();
  EXPECT_LT(trained_loss("e.txt", patterned_text(600), ""), 1.0) << "uniform guessing scores ln(320) = 5.77";
}

}  // namespace
}  // namespace seqmix
