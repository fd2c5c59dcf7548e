#include "seqmix/tasks/time_series.h"

#include <ATen/ATen.h>

#include <filesystem>

#include "seqmix/io/csv_table.h"
#include "seqmix/io/error.h"

namespace seqmix {
namespace {

// Windows of input_len + horizon rows of segment [rows, C] starting every stride rows: inputs
// [N, input_len, C] and targets [N, horizon, C], views into segment (no copy).
Batch windows(const at::Tensor& segment, int64_t input_len, int64_t horizon, int64_t stride) {
  auto w = segment.unfold(0, input_len + horizon, stride).transpose(1, 2);  // [N, input_len + horizon, C]
  return {w.narrow(1, 0, input_len), w.narrow(1, input_len, horizon)};
}

}  // namespace

TimeSeriesTask::TimeSeriesTask(const TimeSeriesOptions& o, std::string resolved_spec)
    : DatasetTask(o.seed), options_(o), spec_(std::move(resolved_spec)) {
  if (o.input_len < 1 || o.horizon < 1) throw Error("task ett: input_len and horizon must be >= 1");
  if (o.stride < 1) throw Error("task ett: stride must be >= 1");
  if (o.split != "test" && o.split != "val") throw Error("task ett: split must be test or val, got '" + o.split + "'");
  if (o.train_rows < o.input_len + o.horizon)
    throw Error("task ett: train_rows (" + std::to_string(o.train_rows) +
                ") must hold at least one window of input_len + horizon = " + std::to_string(o.input_len + o.horizon) +
                " rows");
  const int64_t eval_rows = o.split == "test" ? o.test_rows : o.val_rows;
  if (eval_rows < o.horizon)
    throw Error("task ett: the " + o.split + " split has " + (o.split == "test" ? "test_rows=" : "val_rows=") +
                std::to_string(eval_rows) + " rows, fewer than one horizon (" + std::to_string(o.horizon) + ")");
  if (!std::filesystem::exists(o.path))
    throw Error("task ett: the data file " + o.path +
                " does not exist; give its path as a task option, e.g. --task ett:path=../shared/data/ett/ETTh1.csv");

  const CsvTable table = read_csv_table(o.path, CsvReadOptions{{"date"}});
  // Each split alone within the table first: their sum could overflow.
  for (const auto& [key, rows] : {std::pair<const char*, int64_t>{"train_rows", o.train_rows}, {"val_rows", o.val_rows},
                                  {"test_rows", o.test_rows}})
    if (rows > table.rows())
      throw Error("task ett: " + std::string(key) + "=" + std::to_string(rows) + " exceeds the " +
                  std::to_string(table.rows()) + " rows of " + o.path);
  const int64_t used = o.train_rows + o.val_rows + o.test_rows;
  if (table.rows() < used)
    throw Error("task ett: " + o.path + " has " + std::to_string(table.rows()) +
                " data rows, fewer than train_rows + val_rows + test_rows = " + std::to_string(used));
  columns_ = table.columns;
  features_ = table.cols();

  // Statistics in fp64 over the training rows only (sklearn's StandardScaler: population std).
  auto raw = at::from_blob(const_cast<double*>(table.values.data()), {table.rows(), features_}, at::kDouble)
                 .narrow(0, 0, used)
                 .clone();
  auto train_rows = raw.narrow(0, 0, o.train_rows);
  auto mean = train_rows.mean(0);
  auto std = train_rows.std(0, /*unbiased=*/false);
  for (int64_t c = 0; c < features_; ++c)
    if (!(std[c].item<double>() > 0))
      throw Error("task ett: column '" + columns_[static_cast<size_t>(c)] + "' of " + o.path +
                  " is constant over the training rows, so it cannot be z-scored");
  data_ = ((raw - mean) / std).to(at::kFloat);
  mean_ = mean.to(at::kFloat);
  std_ = std.to(at::kFloat);

  Batch train = windows(data_.narrow(0, 0, o.train_rows), o.input_len, o.horizon, o.stride);
  // The evaluation windows start input_len rows early: their first target is the split's first row.
  const int64_t eval_start = (o.split == "test" ? o.train_rows + o.val_rows : o.train_rows) - o.input_len;
  Batch eval = windows(data_.narrow(0, eval_start, o.input_len + eval_rows), o.input_len, o.horizon, 1);
  set_data(std::move(train), {eval.inputs.contiguous(), eval.targets.contiguous()});
}

std::vector<std::pair<std::string, std::string>> TimeSeriesTask::training_defaults() const {
  return {{"train.lr", "1e-3"},       {"train.batch_size", "32"}, {"train.steps", "1000"},
          {"train.eval_every", "250"}, {"train.weight_decay", "0"}, {"train.target", "0"}};
}

void TimeSeriesTask::check_shapes(const at::Tensor& outputs, const Batch& batch) const {
  TORCH_CHECK(outputs.sizes() == batch.targets.sizes(),
              "task ett: model outputs must have the targets' shape [B, horizon, C] = ", batch.targets.sizes(), " (got ",
              outputs.sizes(), ")");
}

at::Tensor TimeSeriesTask::loss(const at::Tensor& outputs, const Batch& batch) const {
  check_shapes(outputs, batch);
  return at::mse_loss(outputs, batch.targets);
}

void TimeSeriesTask::add_metrics(const at::Tensor& outputs, const Batch& batch, MetricSums& sums) const {
  check_shapes(outputs, batch);
  auto error = (outputs - batch.targets).to(at::kDouble);
  const double n = static_cast<double>(error.numel());
  sums.add("mse", error.square().sum().item<double>(), n);
  sums.add("mae", error.abs().sum().item<double>(), n);
}

}  // namespace seqmix
