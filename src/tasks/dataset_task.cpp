#include "seqmix/tasks/dataset_task.h"

#include <ATen/ATen.h>

#include <numeric>

#include "seqmix/io/error.h"
#include "seqmix/tasks/data_rng.h"

namespace seqmix {

void DatasetTask::set_data(Batch train, Batch test) {
  if (train.size() == 0 || test.size() == 0) throw Error("task " + name() + ": empty training or test set");
  train_ = std::move(train);
  test_ = std::move(test);
}

const std::vector<int64_t>& DatasetTask::permutation(int64_t epoch) {
  if (epoch != cached_epoch_) {
    cached_permutation_.resize(static_cast<size_t>(train_.size()));
    std::iota(cached_permutation_.begin(), cached_permutation_.end(), 0);
    DataRng rng(derive_seed(seed_, 0x5348554646ULL + static_cast<uint64_t>(epoch)));
    rng.shuffle(cached_permutation_);
    cached_epoch_ = epoch;
  }
  return cached_permutation_;
}

Batch DatasetTask::train_batch(int64_t batch_index, int64_t batch_size) {
  const int64_t n = train_.size();
  std::vector<int64_t> rows;
  rows.reserve(static_cast<size_t>(batch_size));
  for (int64_t i = 0; i < batch_size; ++i) {
    const int64_t p = batch_index * batch_size + i;
    rows.push_back(permutation(p / n)[static_cast<size_t>(p % n)]);
  }
  return train_.select(at::tensor(rows, at::kLong));
}

at::Tensor stack_rows(const std::vector<std::vector<int64_t>>& rows) {
  if (rows.empty()) return at::empty({0, 0}, at::kLong);
  const int64_t T = static_cast<int64_t>(rows.front().size());
  auto out = at::empty({static_cast<int64_t>(rows.size()), T}, at::kLong);
  auto* p = out.data_ptr<int64_t>();
  for (const auto& r : rows) {
    if (static_cast<int64_t>(r.size()) != T) throw std::logic_error("stack_rows: rows of different lengths");
    p = std::copy(r.begin(), r.end(), p);
  }
  return out;
}

}  // namespace seqmix
