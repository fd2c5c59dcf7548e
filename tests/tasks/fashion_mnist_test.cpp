// The fashion_mnist task on a small generated data set in the IDX layout (always), and on Debian's Fashion-MNIST
// when dataset-fashion-mnist is installed (skipped otherwise): splits, patches, z-scoring, batches, errors; and the
// vit model over it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "seqmix/io/error.h"
#include "seqmix/io/idx.h"
#include "seqmix/models/model_factory.h"
#include "seqmix/models/registry.h"
#include "seqmix/tasks/fashion_mnist.h"
#include "seqmix/tasks/task.h"
#include "seqmix/train/run.h"
#include "seqmix/train/trainer.h"
#include "support/error_of.h"

namespace seqmix {
namespace {
namespace fs = std::filesystem;
using seqmix::testing::error_of;

const char* kDebianFolder = "/usr/share/datasets/fashion-mnist";

// A folder of the four files: n_train / n_test images whose pixels are 20 x label plus the pixel's index mod 7.
fs::path fake_data(const std::string& name, int64_t n_train, int64_t n_test, int64_t bad_label_at = -1) {
  const fs::path dir = fs::temp_directory_path() / ("seqmix-fashion-test-" + std::to_string(::getpid())) / name;
  fs::create_directories(dir);
  auto write = [&](const std::string& prefix, int64_t n) {
    std::vector<uint8_t> images(static_cast<size_t>(n * 28 * 28)), labels(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      labels[i] = static_cast<uint8_t>(i == bad_label_at ? 12 : i % 10);
      for (int64_t p = 0; p < 28 * 28; ++p) images[i * 784 + p] = static_cast<uint8_t>(20 * (i % 10) + p % 7);
    }
    std::ofstream(dir / (prefix + "-images-idx3-ubyte"), std::ios::binary) << idx_bytes({n, 28, 28}, images);
    std::ofstream(dir / (prefix + "-labels-idx1-ubyte"), std::ios::binary) << idx_bytes({n}, labels);
  };
  write("train", n_train);
  write("t10k", n_test);
  return dir;
}

FashionMnistOptions small(const fs::path& dir) {
  FashionMnistOptions o;
  o.path = dir.string();
  o.num_train = 200;
  o.num_val = 50;
  return o;
}

TEST(FashionMnist, ImagesBecomePatchSequencesInRasterOrder) {
  auto images = torch::arange(2 * 28 * 28).remainder(256).to(torch::kByte).view({2, 28, 28});
  auto patches = images_to_patches(images, 7, 0.0, 1.0);  // [2,16,49]
  ASSERT_EQ(patches.sizes(), (std::vector<int64_t>{2, 16, 49}));
  // Patch 5 is row 1, column 1 of patches: pixel (7 + r, 7 + c) at feature 7 r + c.
  for (int64_t r : {0, 3, 6})
    for (int64_t c : {0, 4, 6})
      EXPECT_FLOAT_EQ(patches[1][5][7 * r + c].item<float>(), images[1][7 + r][7 + c].item<float>() / 255.0f);
}

TEST(FashionMnist, SplitsShapesAndBatchesOfAGeneratedSet) {
  const fs::path dir = fake_data("generated", 300, 40);
  FashionMnistTask task(small(dir), "fashion_mnist");
  EXPECT_EQ(task.seq_len(), 49);
  EXPECT_EQ(task.input_features(), 16);
  EXPECT_EQ(task.output_features(), 10);
  EXPECT_EQ(task.train_size(), 200);
  const Batch& val = task.test_set();
  EXPECT_EQ(val.inputs.sizes(), (std::vector<int64_t>{50, 49, 16}));
  EXPECT_EQ(val.targets.scalar_type(), torch::kLong);
  // The training images are z-scored with their own statistics.
  const Batch first = task.train_batch(0, 200);
  EXPECT_NEAR(first.inputs.mean().item<double>(), 0.0, 1e-4);
  EXPECT_NEAR(first.inputs.std().item<double>(), 1.0, 1e-2);
  // Labels follow their images (a pixel's grey level is 20 x label + small): the batch pairs them right.
  auto level = first.inputs.select(2, 0).select(1, 0);  // first pixel of each image, z-scored
  for (int64_t i = 1; i < 200; ++i)
    if (first.targets[i].item<int64_t>() == first.targets[0].item<int64_t>())
      EXPECT_FLOAT_EQ(level[i].item<float>(), level[0].item<float>());
  // One epoch visits every training image once; the next epoch in another order.
  EXPECT_EQ(std::get<0>(at::_unique(first.targets)).numel(), 10);
  const Batch again = task.train_batch(0, 200), next = task.train_batch(1, 200);
  EXPECT_TRUE(torch::equal(first.inputs, again.inputs));
  EXPECT_FALSE(torch::equal(first.targets, next.targets));
  EXPECT_TRUE(torch::equal(std::get<0>(first.targets.sort()), std::get<0>(next.targets.sort())));
  // heldout=test: the test images.
  FashionMnistOptions o = small(dir);
  o.heldout = "test";
  FashionMnistTask on_test(o, "fashion_mnist");
  EXPECT_EQ(on_test.test_set().size(), 40);
}

TEST(FashionMnist, BadDataAndOptionsAreClearErrors) {
  const fs::path dir = fake_data("errors", 300, 40);
  FashionMnistOptions o = small(dir);
  o.patch = 5;
  EXPECT_NE(error_of([&] { FashionMnistTask(o, "x"); }).find("patch=5 must divide 28"), std::string::npos);
  o = small(dir);
  o.num_train = 280;
  EXPECT_NE(error_of([&] { FashionMnistTask(o, "x"); }).find("num_train=280 and num_val=50 exceed the 300 training images"),
            std::string::npos);
  o = small(fs::temp_directory_path() / "no-such-fashion-folder");
  EXPECT_NE(error_of([&] { FashionMnistTask(o, "x"); }).find("no train-images-idx3-ubyte[.gz] in"), std::string::npos);
  const fs::path bad = fake_data("bad_label", 300, 40, 17);
  EXPECT_NE(error_of([&] { FashionMnistTask(small(bad), "x"); }).find("label 17 is 12, not a class 0-9"), std::string::npos);
  const fs::path short_labels = fake_data("short_labels", 300, 40);
  std::ofstream(short_labels / "train-labels-idx1-ubyte", std::ios::binary) << idx_bytes({299}, std::vector<uint8_t>(299, 1));
  EXPECT_NE(error_of([&] { FashionMnistTask(small(short_labels), "x"); }).find("holds 299 labels for the 300 images"),
            std::string::npos);
  const fs::path torn = fake_data("torn", 300, 40);
  fs::resize_file(torn / "train-images-idx3-ubyte", 10000);
  EXPECT_NE(error_of([&] { FashionMnistTask(small(torn), "x"); }).find("is truncated"), std::string::npos);
}

TEST(FashionMnist, TheVitClassifiesPatchesAndRefusesCausalMixers) {
  ModelContext c;
  c.input_features = 16;
  c.output_features = 10;
  c.seq_len = 49;
  c.mixers = {"softmax:causal=0,heads=2", "ela:causal=0,heads=2"};
  auto model = build_model("vit:dim=16,layers=2", c);
  EXPECT_EQ(model->forward(torch::randn({3, 49, 16})).sizes(), (std::vector<int64_t>{3, 10}));
  c.mixers = {"softmax:heads=2"};
  EXPECT_NE(error_of([&] { build_model("vit:dim=16,layers=1", c); }).find("model vit is an encoder: the mixer of block 0 reads causally"),
            std::string::npos);
  c.mixers = {"gla:heads=2"};
  EXPECT_NE(error_of([&] { build_model("vit:dim=16,layers=1", c); }).find("give it causal=0"), std::string::npos);
  ModelContext tokens;
  tokens.vocab_size = 16;
  tokens.seq_len = 8;
  tokens.mixers = {"softmax:causal=0"};
  EXPECT_NE(error_of([&] { build_model("vit", tokens); }).find("model vit classifies images"), std::string::npos);
}

// A classification run logs its throughput as labelled images per second (scored_sequences_per_s, one per
// image of the batch), not as scored tokens: the 49 patches of an image are one target.
TEST(FashionMnist, TrainingLogsScoredSequencesNotTokens) {
  FashionMnistTask task(small(fake_data("throughput", 300, 40)), "fashion_mnist");
  auto model =
      build_model("vit:dim=16,layers=1", model_context_for(task, {parse_mixer_spec("softmax:causal=0,heads=2")}));
  TrainConfig config;
  config.steps = 2;
  config.target = 0;
  config.batch_size = 8;
  config.log_every = 1;
  config.eval_every = 2;
  config.out_dir = (fs::temp_directory_path() / ("seqmix-fashion-test-" + std::to_string(::getpid())) / "run").string();
  config.quiet = true;
  fs::remove_all(config.out_dir);
  train(*model, task, config);
  std::ifstream log(fs::path(config.out_dir) / "metrics.jsonl");
  int train_lines = 0;
  for (std::string line; std::getline(log, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["split"] != "train") continue;
    ++train_lines;
    EXPECT_GT(j.value("scored_sequences_per_s", 0.0), 0.0) << line;
    EXPECT_FALSE(j.contains("scored_tokens_per_s")) << line;
  }
  EXPECT_EQ(train_lines, 2);
}

TEST(FashionMnist, DebiansDataHasTheStandardSplit) {
  if (!fs::exists(kDebianFolder)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  FashionMnistOptions o;
  o.heldout = "test";
  FashionMnistTask task(o, "fashion_mnist");
  EXPECT_EQ(task.train_size(), 55000);
  const Batch& test = task.test_set();
  EXPECT_EQ(test.size(), 10000);
  // 1,000 test images per class (Xiao et al. 2017).
  EXPECT_TRUE(torch::equal(test.targets.bincount(), torch::full({10}, 1000, torch::kLong)));
}

}  // namespace
}  // namespace seqmix
