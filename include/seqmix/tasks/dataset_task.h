#pragma once
// A task with fixed training and test sets generated once from a seed (as MAD does). Training batches
// walk through one seeded permutation per epoch, so batch k is the same in every run with that seed.
#include <cstdint>

#include "seqmix/tasks/task.h"

namespace seqmix {

class DatasetTask : public Task {
 public:
  Batch train_batch(int64_t batch_index, int64_t batch_size) override;
  int64_t train_size() const override { return train_.size(); }
  const Batch& test_set() override { return test_; }
  const Batch& train_set() const { return train_; }

 protected:
  explicit DatasetTask(uint64_t seed) : seed_(seed) {}
  void set_data(Batch train, Batch test);

 private:
  const std::vector<int64_t>& permutation(int64_t epoch);
  uint64_t seed_;
  Batch train_, test_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> cached_permutation_;
};

// Stacks equal-length rows into an int64 tensor [N, T].
at::Tensor stack_rows(const std::vector<std::vector<int64_t>>& rows);

}  // namespace seqmix
