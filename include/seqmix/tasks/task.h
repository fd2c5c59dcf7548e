#pragma once
// The task interface: data generated deterministically from a seed, the loss, and the metrics.
// Tasks know nothing of models; they describe their inputs and outputs and the trainer joins them.
#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "seqmix/io/declaration.h"
#include "seqmix/io/spec.h"

namespace seqmix {

constexpr int64_t kIgnoreIndex = -100;  // targets at unscored positions

struct Batch {
  at::Tensor inputs;   // tokens [B,T] int64, or real [B,T,F]
  at::Tensor targets;  // tokens [B,T] int64 (kIgnoreIndex = unscored), or real, task-defined
  // Packed rows (a text task's pack=1): bool [B,T], true at the first token of each packed sequence (a row's first
  // token begins one too); the model reads each sequence alone (SequenceModelImpl::run). Undefined otherwise.
  at::Tensor sequence_starts;
  int64_t size() const { return inputs.size(0); }
  Batch rows(int64_t begin, int64_t end) const;       // examples [begin, end)
  Batch select(const at::Tensor& indices) const;      // examples by index
  Batch to(const c10::Device& device) const;          // every tensor on `device` (the model's)
};

// Metrics accumulated over an evaluation set as (sum, weight) pairs; the value is sum / weight.
class MetricSums {
 public:
  void add(const std::string& name, double sum, double weight);
  std::map<std::string, double> values() const;
  // name -> (sum, weight), for combining the sums of several processes.
  const std::map<std::string, std::pair<double, double>>& entries() const { return sums_; }

 private:
  std::map<std::string, std::pair<double, double>> sums_;
};

class Task {
 public:
  virtual ~Task() = default;
  virtual std::string name() const = 0;
  // The task spec with every option spelled out.
  virtual std::string resolved_spec() const = 0;

  // What the model sees and emits.
  virtual int64_t vocab_size() const { return 0; }       // > 0 for token tasks
  virtual int64_t input_features() const { return 0; }   // > 0 for real-valued inputs
  virtual int64_t output_features() const { return 0; }  // > 0 for real-valued outputs
  virtual int64_t seq_len() const = 0;                   // positions per example
  // > 0 for forecasts: the model emits [B, output_len, output_features] after reading the whole input,
  // rather than one output per input position.
  virtual int64_t output_len() const { return 0; }

  // The batch_index-th training batch; the task handles epochs and shuffling, deterministically.
  virtual Batch train_batch(int64_t batch_index, int64_t batch_size) = 0;
  // Training examples per epoch (0 for tasks that generate fresh examples for every batch).
  virtual int64_t train_size() const = 0;
  // The held-out evaluation set.
  virtual const Batch& test_set() = 0;
  // Batch size of evaluation (it changes per-batch metrics such as MAD's macro accuracy).
  virtual int64_t eval_batch_size() const { return 128; }

  // Scalar training loss from model outputs.
  virtual at::Tensor loss(const at::Tensor& outputs, const Batch& batch) const;
  // Adds this batch's metrics to sums.
  virtual void add_metrics(const at::Tensor& outputs, const Batch& batch, MetricSums& sums) const;
  // The metric that defines success (early stop, summaries).
  virtual std::string primary_metric() const { return "accuracy"; }
  // The model spec this task is measured with when the user names none (MAD's backbone for MAD tasks).
  virtual std::string default_model() const { return "lm"; }
  // Training settings this task is measured with (run-config keys such as "train.lr"), used where the
  // user sets none.
  virtual std::vector<std::pair<std::string, std::string>> training_defaults() const { return {}; }
  virtual bool higher_is_better() const { return true; }
  // Files a user of the run needs besides the weights (file name -> content), written into the run
  // directory by `seqmix train`, e.g. the tokenizer of a text task.
  virtual std::map<std::string, std::string> artifacts() const { return {}; }
};

// Cross-entropy over positions whose target is not kIgnoreIndex; outputs [B,T,V], targets [B,T].
at::Tensor masked_cross_entropy(const at::Tensor& logits, const at::Tensor& targets);
// Adds "accuracy" (MAD's: per-batch macro recall over the classes present, as torchmetrics'
// MulticlassAccuracy with ignore_index) and "token_accuracy" (plain share of scored positions right).
void add_token_accuracy(const at::Tensor& logits, const at::Tensor& targets, MetricSums& sums);

// Every task's declaration (src/tasks/registry.cpp), in `seqmix list` order: a task is made from its options struct
// and its resolved spec (which it reports, and its runs record).
using TaskDeclaration = Declaration<std::unique_ptr<Task>, const std::string&>;
const std::vector<TaskDeclaration>& task_declarations();
const std::vector<ComponentInfo>& task_infos();
// A task spec parsed once ("mad.in_context_recall:seq_len=64"); made from text, it parses it.
struct TaskSpec : ParsedSpec<std::unique_ptr<Task>, const std::string&> {
  TaskSpec(const std::string& text);                           // NOLINT(google-explicit-constructor)
  TaskSpec(const char* text) : TaskSpec(std::string(text)) {}  // NOLINT(google-explicit-constructor)
};
std::unique_ptr<Task> build_task(const TaskSpec& spec);

}  // namespace seqmix
