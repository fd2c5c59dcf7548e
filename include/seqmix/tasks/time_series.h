#pragma once
// Multivariate time-series forecasting on a CSV table (ETT by default), with the Informer/Autoformer
// protocol: the first train_rows rows train, the next val_rows validate, the next test_rows test; every
// column is z-scored with the training rows' mean and (population) standard deviation; an example is a
// window of input_len rows followed by the horizon rows to forecast. Validation and test windows start
// input_len rows before their split, so that their first target is the split's first row.
// Inputs [B, input_len, C] float, targets [B, horizon, C]; loss and metric "mse", also "mae", both means
// over every predicted value on the normalised scale.
#include <string>

#include "seqmix/tasks/dataset_task.h"

namespace seqmix {

struct TimeSeriesOptions {
  std::string path = "../shared/data/ett/ETTh1.csv";
  int64_t input_len = 96;
  int64_t horizon = 96;
  // ETTh's 12/4/4 months of hourly rows (12*30*24, 4*30*24, 4*30*24); rows after them are unused.
  int64_t train_rows = 8640;
  int64_t val_rows = 2880;
  int64_t test_rows = 2880;
  std::string split = "test";  // which split is the evaluation set: test | val
  int64_t stride = 1;          // step between training windows (evaluation windows always step by 1)
  uint64_t seed = 12345;       // order of the training windows
};

class TimeSeriesTask : public DatasetTask {
 public:
  TimeSeriesTask(const TimeSeriesOptions& options, std::string resolved_spec);
  std::string name() const override { return "ett"; }
  std::string resolved_spec() const override { return spec_; }
  int64_t input_features() const override { return features_; }
  int64_t output_features() const override { return features_; }
  int64_t seq_len() const override { return options_.input_len; }
  int64_t output_len() const override { return options_.horizon; }
  int64_t eval_batch_size() const override { return 256; }

  at::Tensor loss(const at::Tensor& outputs, const Batch& batch) const override;
  void add_metrics(const at::Tensor& outputs, const Batch& batch, MetricSums& sums) const override;
  std::string primary_metric() const override { return "mse"; }
  bool higher_is_better() const override { return false; }
  std::string default_model() const override { return "forecaster"; }
  std::vector<std::pair<std::string, std::string>> training_defaults() const override;

  // Names of the forecast columns, and the training rows' statistics used to normalise them ([C] each).
  const std::vector<std::string>& columns() const { return columns_; }
  const at::Tensor& train_mean() const { return mean_; }
  const at::Tensor& train_std() const { return std_; }
  // The whole table normalised [rows, C]: window k of a split reads rows first + k .. first + k + input_len
  // + horizon - 1, where first is 0, train_rows - input_len or train_rows + val_rows - input_len.
  const at::Tensor& normalised() const { return data_; }

 private:
  void check_shapes(const at::Tensor& outputs, const Batch& batch) const;
  TimeSeriesOptions options_;
  std::string spec_;
  int64_t features_ = 0;
  std::vector<std::string> columns_;
  at::Tensor mean_, std_, data_;
};

}  // namespace seqmix
