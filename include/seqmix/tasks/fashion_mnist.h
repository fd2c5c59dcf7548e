#pragma once
// Fashion-MNIST image classification (Xiao et al. 2017; Debian's dataset-fashion-mnist package: 60,000 training
// and 10,000 test images, 28x28 grey levels, 10 classes). An image is a sequence of non-overlapping patch x patch
// patches in raster order, each a token of patch^2 pixel values (z-scored with the training images' mean and
// standard deviation): inputs [B, (28/patch)^2, patch^2], target the class [B]. The last num_val training images
// of a seeded shuffle are the validation split, which training evaluates on (test_set()); heldout=test evaluates
// on the 10,000 test images instead (`seqmix eval --task-option heldout=test`). Loss: cross-entropy of the logits
// [B,10]; metric: accuracy.
#include "seqmix/tasks/task.h"

namespace seqmix {

struct FashionMnistOptions {
  std::string path = "/usr/share/datasets/fashion-mnist";  // the four IDX files (.gz or not)
  int64_t patch = 4;
  int64_t num_train = 55000;  // training images used (of the 60,000 - num_val not held out)
  int64_t num_val = 5000;
  std::string heldout = "val";  // val | test: what test_set() holds
  uint64_t seed = 12345;        // the shuffle that carves the validation split, and the batch order
};

class FashionMnistTask : public Task {
 public:
  FashionMnistTask(const FashionMnistOptions& options, std::string resolved_spec);
  std::string name() const override { return "fashion_mnist"; }
  std::string resolved_spec() const override { return spec_; }
  int64_t input_features() const override { return options_.patch * options_.patch; }
  int64_t output_features() const override { return kClasses; }
  int64_t seq_len() const override { return (kSide / options_.patch) * (kSide / options_.patch); }
  Batch train_batch(int64_t batch_index, int64_t batch_size) override;
  int64_t train_size() const override { return train_.size(); }
  const Batch& test_set() override { return heldout_; }
  int64_t eval_batch_size() const override { return 500; }
  at::Tensor loss(const at::Tensor& outputs, const Batch& batch) const override;
  void add_metrics(const at::Tensor& outputs, const Batch& batch, MetricSums& sums) const override;
  std::string default_model() const override { return "vit"; }
  std::vector<std::pair<std::string, std::string>> training_defaults() const override {
    return {{"mixer", "softmax:causal=0"}, {"train.batch_size", "128"}, {"train.lr", "0.001"},
            {"train.steps", "2000"}, {"train.eval_every", "200"}, {"train.target", "0"}, {"train.warmup", "100"},
            {"train.min_lr", "0.00001"}};
  }

  static constexpr int64_t kSide = 28, kClasses = 10;

 private:
  FashionMnistOptions options_;
  std::string spec_;
  Batch train_, heldout_;  // images as patch sequences, labels
  std::vector<int64_t> order_;  // the training images in the order of epoch order_epoch_
  int64_t order_epoch_ = -1;
};

// Images [N,28,28] uint8 -> patch sequences [N,(28/p)^2,p^2] float, z-scored with (mean, std).
at::Tensor images_to_patches(const at::Tensor& images, int64_t patch, double mean, double std);

}  // namespace seqmix
