#include "seqmix/tasks/fashion_mnist.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <numeric>

#include "seqmix/io/error.h"
#include "seqmix/io/idx.h"
#include "seqmix/tasks/data_rng.h"

namespace seqmix {
namespace fs = std::filesystem;
namespace {

// The IDX file `name` in folder, gzip-compressed (Debian's package) or not.
std::string idx_file(const std::string& folder, const std::string& name) {
  for (const std::string& candidate : {name + ".gz", name}) {
    const fs::path path = fs::path(folder) / candidate;
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) return path.string();
  }
  throw Error("task fashion_mnist: no " + name + "[.gz] in " + folder +
              " (install Debian's dataset-fashion-mnist, or give the folder as path=DIR)");
}

// (images [N,28,28] uint8, labels [N] int64) of one split, checked against each other.
std::pair<at::Tensor, at::Tensor> read_split(const std::string& folder, const std::string& prefix) {
  const std::string images_path = idx_file(folder, prefix + "-images-idx3-ubyte");
  const std::string labels_path = idx_file(folder, prefix + "-labels-idx1-ubyte");
  IdxArray images = read_idx(images_path), labels = read_idx(labels_path);
  const int64_t side = FashionMnistTask::kSide;
  if (images.sizes.size() != 3 || images.sizes[1] != side || images.sizes[2] != side)
    throw Error("task fashion_mnist: " + images_path + " does not hold 28x28 images");
  if (labels.sizes.size() != 1 || labels.sizes[0] != images.sizes[0])
    throw Error("task fashion_mnist: " + labels_path + " holds " +
                std::to_string(labels.sizes.empty() ? 0 : labels.sizes[0]) + " labels for the " +
                std::to_string(images.sizes[0]) + " images of " + images_path);
  for (size_t i = 0; i < labels.values.size(); ++i)
    if (labels.values[i] >= FashionMnistTask::kClasses)
      throw Error("task fashion_mnist: " + labels_path + " label " + std::to_string(i) + " is " +
                  std::to_string(labels.values[i]) + ", not a class 0-9");
  const int64_t n = images.sizes[0];
  auto x = at::from_blob(images.values.data(), {n, side, side}, at::kByte).clone();
  auto y = at::from_blob(labels.values.data(), {n}, at::kByte).to(at::kLong);
  return {x, y};
}

}  // namespace

at::Tensor images_to_patches(const at::Tensor& images, int64_t patch, double mean, double std) {
  const int64_t n = images.size(0), side = images.size(1), per_side = side / patch;
  auto x = (images.to(at::kFloat) / 255.0 - mean) / std;                             // [N,28,28]
  return x.view({n, per_side, patch, per_side, patch}).permute({0, 1, 3, 2, 4})    // [N,rows,cols,p,p]
      .reshape({n, per_side * per_side, patch * patch});                            // raster order of patches
}

FashionMnistTask::FashionMnistTask(const FashionMnistOptions& o, std::string resolved_spec)
    : options_(o), spec_(std::move(resolved_spec)) {
  if (o.patch < 1 || kSide % o.patch != 0)
    throw Error("task fashion_mnist: patch=" + std::to_string(o.patch) + " must divide 28 (1, 2, 4, 7, 14 or 28)");
  if (o.heldout != "val" && o.heldout != "test") throw Error("task fashion_mnist: heldout must be val or test");
  auto [train_images, train_labels] = read_split(o.path, "train");
  const int64_t available = train_images.size(0);  // 60,000 in Fashion-MNIST
  if (o.num_train + o.num_val > available)
    throw Error("task fashion_mnist: num_train=" + std::to_string(o.num_train) + " and num_val=" +
                std::to_string(o.num_val) + " exceed the " + std::to_string(available) + " training images of " + o.path);
  // The validation split: the last num_val of a seeded shuffle of the training images.
  std::vector<int64_t> order(static_cast<size_t>(available));
  std::iota(order.begin(), order.end(), 0);
  DataRng rng(derive_seed(o.seed, 1));
  rng.shuffle(order);
  auto index = at::tensor(order, at::kLong);
  auto train_index = index.slice(0, 0, o.num_train), val_index = index.slice(0, available - o.num_val);
  auto train_pixels = train_images.index_select(0, train_index);
  const auto scaled = train_pixels.to(at::kDouble) / 255.0;
  const double mean = scaled.mean().item<double>(), std = scaled.std().item<double>();
  train_ = {images_to_patches(train_pixels, o.patch, mean, std), train_labels.index_select(0, train_index)};
  if (o.heldout == "val") {
    heldout_ = {images_to_patches(train_images.index_select(0, val_index), o.patch, mean, std),
                train_labels.index_select(0, val_index)};
  } else {
    auto [test_images, test_labels] = read_split(o.path, "t10k");
    heldout_ = {images_to_patches(test_images, o.patch, mean, std), test_labels};
  }
}

Batch FashionMnistTask::train_batch(int64_t batch_index, int64_t batch_size) {
  // Example k of the stream is image order_e[k mod N] of epoch e = k / N, each epoch its own seeded shuffle.
  const int64_t n = train_.size();
  std::vector<int64_t> picks(static_cast<size_t>(batch_size));
  for (int64_t i = 0; i < batch_size; ++i) {
    const int64_t k = batch_index * batch_size + i, epoch = k / n;
    if (epoch != order_epoch_) {
      order_.resize(static_cast<size_t>(n));
      std::iota(order_.begin(), order_.end(), 0);
      DataRng rng(derive_seed(options_.seed, 2 + static_cast<uint64_t>(epoch)));
      rng.shuffle(order_);
      order_epoch_ = epoch;
    }
    picks[static_cast<size_t>(i)] = order_[static_cast<size_t>(k % n)];
  }
  return train_.select(at::tensor(picks, at::kLong));
}

at::Tensor FashionMnistTask::loss(const at::Tensor& outputs, const Batch& batch) const {
  TORCH_CHECK(outputs.dim() == 2 && outputs.size(0) == batch.size() && outputs.size(1) == kClasses,
              "fashion_mnist: model outputs must be logits [", batch.size(), ", 10] (got ", outputs.sizes(), ")");
  return at::cross_entropy_loss(outputs, batch.targets);
}

void FashionMnistTask::add_metrics(const at::Tensor& outputs, const Batch& batch, MetricSums& sums) const {
  const double n = static_cast<double>(batch.size());
  sums.add("accuracy", outputs.argmax(1).eq(batch.targets).sum().item<double>(), n);
}

}  // namespace seqmix
