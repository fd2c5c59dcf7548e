#include "seqmix/dist/gradient_averager.h"

#include <torch/torch.h>

#include "seqmix/io/error.h"

namespace seqmix::dist {

GradientAverager::GradientAverager(std::shared_ptr<Communicator> communicator, std::vector<at::Tensor> parameters,
                                   int64_t bucket_bytes)
    : communicator_(std::move(communicator)), parameters_(std::move(parameters)) {
  if (!communicator_) throw Error("GradientAverager needs a communicator");
  if (bucket_bytes < 1) throw Error("GradientAverager: bucket_bytes must be positive");
  // Parameters in model order, a new bucket when the dtype changes or the bucket is full: every rank builds
  // the same buckets from the same model.
  int64_t bytes = 0;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const auto& p = parameters_[i];
    const int64_t size = p.numel() * static_cast<int64_t>(p.element_size());
    const bool fresh = buckets_.empty() || bytes + size > bucket_bytes ||
                       parameters_[buckets_.back().members.front()].scalar_type() != p.scalar_type();
    if (fresh) {
      buckets_.push_back({});
      bytes = 0;
    }
    buckets_.back().members.push_back(i);
    bytes += size;
  }
  for (auto& bucket : buckets_) {
    int64_t numel = 0;
    for (size_t i : bucket.members) numel += parameters_[i].numel();
    bucket.flat = torch::empty({numel}, parameters_[bucket.members.front()].options());
  }
}

void GradientAverager::average() {
  torch::NoGradGuard no_grad;
  const auto count = static_cast<int64_t>(parameters_.size());
  // Which gradients exist on any rank: those are averaged, with zeros where a rank has none.
  auto defined = torch::zeros({std::max<int64_t>(count, 1)}, torch::kFloat32);
  auto defined_values = defined.accessor<float, 1>();
  for (int64_t i = 0; i < count; ++i) defined_values[i] = parameters_[i].grad().defined() ? 1.0f : 0.0f;
  communicator_->all_reduce_max(defined, "which gradients exist");
  defined_values = defined.accessor<float, 1>();

  std::vector<at::Tensor> flats;
  for (auto& bucket : buckets_) {
    int64_t offset = 0;
    for (size_t i : bucket.members) {
      const auto& p = parameters_[i];
      auto slot = bucket.flat.narrow(0, offset, p.numel());
      if (p.grad().defined())
        slot.copy_(p.grad().reshape({-1}));
      else
        slot.zero_();
      offset += p.numel();
    }
    flats.push_back(bucket.flat);
  }
  communicator_->all_reduce_sum_all(flats, "the gradients");

  const double scale = 1.0 / communicator_->world_size();
  for (auto& bucket : buckets_) {
    bucket.flat.mul_(scale);
    int64_t offset = 0;
    for (size_t i : bucket.members) {
      auto& p = parameters_[i];
      auto slot = bucket.flat.narrow(0, offset, p.numel()).view(p.sizes());
      offset += p.numel();
      if (defined_values[static_cast<int64_t>(i)] == 0.0f) continue;
      if (p.grad().defined())
        p.mutable_grad().copy_(slot);
      else
        p.mutable_grad() = slot.clone();
    }
  }
}

}  // namespace seqmix::dist
