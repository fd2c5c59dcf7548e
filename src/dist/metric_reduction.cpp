#include "seqmix/dist/metric_reduction.h"

#include <torch/torch.h>

#include <set>

namespace seqmix::dist {
namespace {

// The union of every rank's metric names (a rank may lack one, e.g. a shard with no scored position),
// the same sorted list on every rank.
std::vector<std::string> all_metric_names(Communicator& communicator, const MetricSums& local) {
  std::string joined;
  for (const auto& [name, sum_weight] : local.entries()) joined += name + '\n';
  auto length = torch::tensor({static_cast<int64_t>(joined.size())}, torch::kInt64);
  communicator.all_reduce_max(length, "the length of the metric names");
  auto bytes = torch::zeros({length.item<int64_t>() + 1}, torch::kUInt8);  // zero-padded; +1: never empty
  std::copy(joined.begin(), joined.end(), bytes.data_ptr<uint8_t>());
  std::set<std::string> names;
  for (const auto& gathered : communicator.all_gather(bytes, "the metric names")) {
    const std::string text(reinterpret_cast<const char*>(gathered.data_ptr<uint8_t>()));
    for (size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
      names.insert(text.substr(start, end - start));
  }
  return {names.begin(), names.end()};
}

}  // namespace

MetricSums all_reduce_metric_sums(Communicator& communicator, const MetricSums& local) {
  const std::vector<std::string> names = all_metric_names(communicator, local);
  const auto& entries = local.entries();
  auto sums = torch::zeros({static_cast<int64_t>(2 * names.size()) + 1}, torch::kFloat64);  // +1: never empty
  auto values = sums.accessor<double, 1>();
  for (size_t i = 0; i < names.size(); ++i) {
    const auto found = entries.find(names[i]);
    if (found == entries.end()) continue;  // this rank adds nothing to that metric
    values[static_cast<int64_t>(2 * i)] = found->second.first;
    values[static_cast<int64_t>(2 * i + 1)] = found->second.second;
  }
  communicator.all_reduce_sum(sums, "the metrics");
  values = sums.accessor<double, 1>();
  MetricSums total;
  for (size_t i = 0; i < names.size(); ++i)
    total.add(names[i], values[static_cast<int64_t>(2 * i)], values[static_cast<int64_t>(2 * i + 1)]);
  return total;
}

}  // namespace seqmix::dist
