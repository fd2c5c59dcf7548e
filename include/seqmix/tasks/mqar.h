#pragma once
// Zoology's multi-query associative recall (specs/mad.md 7): D distinct key-value pairs, then each key
// queried once at a power-law distributed position; the value is predicted at the query key.
#include "seqmix/tasks/dataset_task.h"
#include "seqmix/tasks/data_rng.h"
#include "seqmix/tasks/mad/recall.h"

namespace seqmix {

struct MqarOptions {
  int64_t vocab_size = 8192;
  int64_t seq_len = 64;
  int64_t num_kv_pairs = 8;
  double power_a = 0.01;
  bool random_non_queries = true;
  int64_t num_passes = 1;
  int64_t num_train = 100000;
  int64_t num_test = 3000;
  uint64_t seed = 123;
};

void validate(const MqarOptions& options);
// input tokens [L] and shifted labels [L] (kIgnoreIndex except the D query positions).
TokenExample mqar_example(const MqarOptions& options, DataRng& rng);

class MqarTask : public DatasetTask {
 public:
  MqarTask(const MqarOptions& options, std::string resolved_spec);
  std::string name() const override { return "mqar"; }
  std::string resolved_spec() const override { return spec_; }
  int64_t vocab_size() const override { return options_.vocab_size; }
  int64_t seq_len() const override { return options_.seq_len; }
  // Zoology's model: LayerNorm blocks with a GELU MLP, learned positions, embedding dropout 0.1, tied head.
  std::string default_model() const override { return "lm:norm=layer,channel=mlp,pos=learned,tie=1,dropout=0.1"; }
  // Zoology's training: AdamW lr 1e-3, wd 0.1, batch 32, cosine per epoch to 0 over 100 epochs,
  // evaluation every epoch, stop once the accuracy reaches 0.99.
  std::vector<std::pair<std::string, std::string>> training_defaults() const override;
  // Zoology's metric: per-example accuracy over its queries, averaged over examples.
  void add_metrics(const at::Tensor& outputs, const Batch& batch, MetricSums& sums) const override;

 private:
  MqarOptions options_;
  std::string spec_;
};

}  // namespace seqmix
