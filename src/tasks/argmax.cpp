#include "seqmix/tasks/argmax.h"

#include <ATen/ATen.h>

#include "seqmix/io/error.h"
#include "seqmix/tasks/data_rng.h"

namespace seqmix {

ArgmaxTask::ArgmaxTask(const ArgmaxOptions& o, std::string resolved_spec) : options_(o), spec_(std::move(resolved_spec)) {
  if (o.seq_len < 2 || o.dim < 1) throw Error("argmax: seq_len must be >= 2 and dim >= 1");
  if (o.margin <= 0 || o.noise < 0) throw Error("argmax: margin must be positive and noise non-negative");
  if (o.num_train < 1 || o.num_test < 1) throw Error("argmax: num_train and num_test must be >= 1");
  std::vector<at::Tensor> xs, ys;
  for (int64_t i = 0; i < o.num_test; ++i) {
    Batch e = example(i, true);
    xs.push_back(e.inputs);
    ys.push_back(e.targets);
  }
  test_ = {at::stack(xs), at::stack(ys)};
}

Batch ArgmaxTask::example(int64_t index, bool test) const {
  const int64_t T = options_.seq_len, D = options_.dim;
  DataRng rng(derive_seed(derive_seed(options_.seed, test ? 2 : 1), static_cast<uint64_t>(index)));
  auto v = at::empty({T, D}, at::kFloat);
  auto* p = v.data_ptr<float>();
  for (int64_t i = 0; i < T * D; ++i) p[i] = static_cast<float>(options_.noise * rng.normal());
  for (int64_t j = 0; j < D; ++j) {
    const int64_t winner = rng.below(T);
    p[winner * D + j] = static_cast<float>(options_.margin + options_.noise * rng.normal());
  }
  return {v, std::get<0>(v.max(0))};
}

Batch ArgmaxTask::train_batch(int64_t batch_index, int64_t batch_size) {
  std::vector<at::Tensor> xs, ys;
  for (int64_t i = 0; i < batch_size; ++i) {
    Batch e = example((batch_index * batch_size + i) % options_.num_train, false);
    xs.push_back(e.inputs);
    ys.push_back(e.targets);
  }
  return {at::stack(xs), at::stack(ys)};
}

at::Tensor ArgmaxTask::loss(const at::Tensor& outputs, const Batch& batch) const {
  TORCH_CHECK(outputs.sizes() == batch.targets.sizes(), "argmax: model outputs must have shape ", batch.targets.sizes(),
              " (got ", outputs.sizes(), ")");
  return at::mse_loss(outputs, batch.targets);
}

void ArgmaxTask::add_metrics(const at::Tensor& outputs, const Batch& batch, MetricSums& sums) const {
  const double n = static_cast<double>(batch.size());
  sums.add("mse", at::mse_loss(outputs, batch.targets).item<double>() * n, n);
  auto winner = batch.inputs.argmax(1);                                         // [B,D]
  auto nearest = (batch.inputs - outputs.unsqueeze(1)).square().argmin(1);      // [B,D]
  sums.add("index_accuracy", (nearest == winner).to(at::kDouble).mean(1).sum().item<double>(), n);
}

}  // namespace seqmix
