#include "seqmix/tasks/mqar.h"

#include <ATen/ATen.h>

#include <cmath>
#include <set>

#include "seqmix/io/error.h"

namespace seqmix {

void validate(const MqarOptions& o) {
  if (o.seq_len % 2 != 0) throw Error("mqar: seq_len must be even");
  if (o.vocab_size <= o.seq_len) throw Error("mqar: vocab_size must exceed seq_len");
  if (o.num_kv_pairs < 1 || 2 * o.num_kv_pairs * o.num_passes + 2 * o.num_kv_pairs > o.seq_len)
    throw Error("mqar: need 2 * num_kv_pairs * num_passes + 2 * num_kv_pairs <= seq_len");
  if (o.vocab_size / 2 - 1 < o.num_kv_pairs) throw Error("mqar: too few key tokens for num_kv_pairs distinct keys");
  if (o.num_passes < 1) throw Error("mqar: num_passes must be >= 1");
  if (o.num_train < 1 || o.num_test < 1) throw Error("mqar: num_train and num_test must be >= 1");
}

TokenExample mqar_example(const MqarOptions& o, DataRng& rng) {
  const int64_t V = o.vocab_size, L = o.seq_len, D = o.num_kv_pairs;
  // D distinct keys from [1, V/2) and D distinct values from [V/2, V), paired in draw order.
  auto distinct = [&](int64_t first, int64_t count) {
    std::set<int64_t> seen;
    std::vector<int64_t> out;
    while (static_cast<int64_t>(out.size()) < D) {
      const int64_t t = first + rng.below(count);
      if (seen.insert(t).second) out.push_back(t);
    }
    return out;
  };
  const auto keys = distinct(1, V / 2 - 1);
  const auto values = distinct(V / 2, V - V / 2);
  std::vector<int64_t> seq;
  for (int64_t p = 0; p < o.num_passes; ++p)
    for (int64_t j = 0; j < D; ++j) {
      seq.push_back(keys[static_cast<size_t>(j)]);
      seq.push_back(values[static_cast<size_t>(j)]);
    }
  const int64_t context = static_cast<int64_t>(seq.size());
  std::vector<int64_t> labels(static_cast<size_t>(L + 1), kIgnoreIndex);
  seq.resize(static_cast<size_t>(L + 1), 0);
  // Gap slot i (1-based) has weight i^(power_a - 1): short gaps are favoured.
  const int64_t gaps = (L - context) / 2;
  std::vector<double> weight(static_cast<size_t>(gaps));
  for (int64_t i = 0; i < gaps; ++i) weight[static_cast<size_t>(i)] = std::pow(static_cast<double>(i + 1), o.power_a - 1.0);
  for (int64_t j = 0; j < D; ++j) {
    const int64_t g = rng.weighted(weight);
    weight[static_cast<size_t>(g)] = 0.0;  // without replacement
    const size_t pos = static_cast<size_t>(context + 2 * g);
    seq[pos] = keys[static_cast<size_t>(j)];
    labels[pos + 1] = values[static_cast<size_t>(j)];
  }
  TokenExample ex;
  ex.tokens.assign(seq.begin(), seq.begin() + L);
  ex.labels.assign(labels.begin() + 1, labels.end());
  if (o.random_non_queries)
    for (size_t i = 0; i < ex.tokens.size(); ++i)
      if (ex.tokens[i] == 0) ex.tokens[i] = rng.below(V);
  return ex;
}

MqarTask::MqarTask(const MqarOptions& o, std::string resolved_spec)
    : DatasetTask(o.seed), options_(o), spec_(std::move(resolved_spec)) {
  validate(o);
  // Separate streams for the two splits, as zoology seeds its train and test segments apart.
  auto make = [&](int64_t n, uint64_t stream) {
    DataRng rng(derive_seed(o.seed, stream));
    std::vector<std::vector<int64_t>> inputs, targets;
    for (int64_t i = 0; i < n; ++i) {
      TokenExample ex = mqar_example(o, rng);
      inputs.push_back(std::move(ex.tokens));
      targets.push_back(std::move(ex.labels));
    }
    return Batch{stack_rows(inputs), stack_rows(targets)};
  };
  Batch train = make(o.num_train, 1);
  Batch test = make(o.num_test, 2);
  set_data(std::move(train), std::move(test));
}

void MqarTask::add_metrics(const at::Tensor& outputs, const Batch& batch, MetricSums& sums) const {
  auto scored = batch.targets != kIgnoreIndex;
  auto correct = (outputs.argmax(-1) == batch.targets) & scored;
  auto per_example = correct.sum(1).to(at::kDouble) / scored.sum(1).clamp_min(1).to(at::kDouble);
  sums.add("accuracy", per_example.sum().item<double>(), static_cast<double>(batch.size()));
  const double n = scored.sum().item<double>();
  if (n > 0) sums.add("token_accuracy", correct.sum().item<double>(), n);
}

std::vector<std::pair<std::string, std::string>> MqarTask::training_defaults() const {
  constexpr int64_t batch = 32, epochs = 100;
  const int64_t steps_per_epoch = (options_.num_train + batch - 1) / batch;
  const std::string epoch = std::to_string(steps_per_epoch);
  return {{"train.lr", "0.001"},
          {"train.weight_decay", "0.1"},
          {"train.batch_size", std::to_string(batch)},
          {"train.steps", std::to_string(epochs * steps_per_epoch)},
          {"train.schedule_stage", epoch},
          {"train.eval_every", epoch},
          {"train.min_lr", "0"},
          {"train.target", "0.99"}};
}

}  // namespace seqmix
