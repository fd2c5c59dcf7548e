#pragma once
// Data parallelism's gradient step: after every rank's backward on its shard of the global batch, each
// gradient becomes the mean over the ranks, so every rank takes the same optimizer step. Gradients travel
// flattened in buckets of about `bucket_bytes` (one all-reduce each, issued together, as PyTorch's DDP
// does), which keeps the number of collectives small for models with many small parameters.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "seqmix/dist/communicator.h"

namespace seqmix::dist {

class GradientAverager {
 public:
  static constexpr int64_t kDefaultBucketBytes = 25 << 20;

  GradientAverager(std::shared_ptr<Communicator> communicator, std::vector<at::Tensor> parameters,
                   int64_t bucket_bytes = kDefaultBucketBytes);

  // Every parameter's .grad() becomes the mean over the ranks. A gradient undefined on every rank stays
  // undefined (the optimizer skips that parameter, as it would in one process); one undefined on some
  // ranks only (an expert no token of this shard reached) counts as zeros there.
  void average();

  size_t bucket_count() const { return buckets_.size(); }

 private:
  struct Bucket {
    std::vector<size_t> members;  // indices into parameters_
    at::Tensor flat;              // [sum of member numels], the members' dtype
  };
  std::shared_ptr<Communicator> communicator_;
  std::vector<at::Tensor> parameters_;
  std::vector<Bucket> buckets_;
};

}  // namespace seqmix::dist
