#include "seqmix/tasks/task.h"

#include <ATen/ATen.h>

namespace seqmix {

Batch Batch::rows(int64_t begin, int64_t end) const {
  const auto part = [&](const at::Tensor& t) { return t.defined() ? t.slice(0, begin, end) : t; };
  return {part(inputs), part(targets), part(sequence_starts)};
}

Batch Batch::to(const c10::Device& device) const {
  const auto moved = [&](const at::Tensor& t) { return t.defined() ? t.to(device) : t; };
  return {moved(inputs), moved(targets), moved(sequence_starts)};
}

Batch Batch::select(const at::Tensor& indices) const {
  const auto part = [&](const at::Tensor& t) { return t.defined() ? t.index_select(0, indices) : t; };
  return {part(inputs), part(targets), part(sequence_starts)};
}

void MetricSums::add(const std::string& name, double sum, double weight) {
  auto& s = sums_[name];
  s.first += sum;
  s.second += weight;
}

std::map<std::string, double> MetricSums::values() const {
  std::map<std::string, double> out;
  for (const auto& [name, s] : sums_)
    if (s.second > 0) out[name] = s.first / s.second;
  return out;
}

at::Tensor masked_cross_entropy(const at::Tensor& logits, const at::Tensor& targets) {
  TORCH_CHECK(logits.dim() == 3 && targets.dim() == 2 && logits.size(0) == targets.size(0) &&
                  logits.size(1) == targets.size(1),
              "loss: logits [B,T,V] and targets [B,T] disagree (got ", logits.sizes(), " and ", targets.sizes(), ")");
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}), {},
                                at::Reduction::Mean, kIgnoreIndex);
}

void add_token_accuracy(const at::Tensor& logits, const at::Tensor& targets, MetricSums& sums) {
  auto scored = targets != kIgnoreIndex;
  const int64_t n = scored.sum().item<int64_t>();
  if (n == 0) return;
  auto target = targets.masked_select(scored);
  auto pred = logits.argmax(-1).masked_select(scored);
  auto correct = (pred == target);
  sums.add("token_accuracy", correct.sum().item<double>(), static_cast<double>(n));
  // Macro recall over classes with tp + fp + fn > 0; a class predicted but never a target scores 0.
  const int64_t V = logits.size(-1);
  auto support = at::bincount(target, {}, V);
  auto predicted = at::bincount(pred, {}, V);
  auto tp = at::bincount(target.masked_select(correct), {}, V);
  auto present = (support + predicted) > 0;
  auto recall = tp.to(at::kDouble) / support.clamp_min(1).to(at::kDouble);
  const double macro = recall.masked_select(present).mean().item<double>();
  const double batch = static_cast<double>(logits.size(0));
  sums.add("accuracy", macro * batch, batch);
}

at::Tensor Task::loss(const at::Tensor& outputs, const Batch& batch) const {
  return masked_cross_entropy(outputs, batch.targets);
}

void Task::add_metrics(const at::Tensor& outputs, const Batch& batch, MetricSums& sums) const {
  add_token_accuracy(outputs, batch.targets, sums);
}

}  // namespace seqmix
