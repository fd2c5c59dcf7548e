#pragma once
// The training loop: AdamW with decay groups, warmup + cosine, gradient clipping, evaluation every N
// steps, early stop on a target value of the task's primary metric, and a run directory with
// metrics.jsonl, checkpoints and summary.json. A run resumed from its latest checkpoint continues the
// same trajectory: batches are a function of the step, and model, optimizer and RNG state are restored.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "seqmix/models/sequence_model.h"
#include "seqmix/tasks/task.h"
#include "seqmix/train/optimizer.h"
#include "seqmix/train/precision.h"

namespace seqmix {
namespace dist {
class Communicator;
}

// The defaults are the run config's (run_config_schema in run.h; a test holds them equal).
struct TrainConfig {
  int64_t steps = 2000;
  int64_t batch_size = 64;
  OptimizerConfig optimizer;
  double min_lr = 0.0;
  int64_t warmup_steps = 0;
  double grad_clip = 0.0;        // max global gradient norm; 0 disables clipping
  int64_t eval_every = 100;      // 0: evaluate only at the end
  int64_t log_every = 10;
  double target = 0.99;          // stop once the primary metric reaches this (0 = never)
  std::string select_by;         // "best" evaluation: "" = by the primary metric, "loss" = lowest test loss
  int64_t schedule_stage = 1;    // learning rate held within stages of this many steps (MAD: an epoch)
  int64_t checkpoint_every = 0;  // 0: at every evaluation
  int64_t keep_checkpoints = 3;
  std::string out_dir;           // run directory; empty = write nothing
  bool resume = false;           // continue from the latest checkpoint in out_dir
  bool extend = false;           // resume with a new total of steps: a run that stopped early at its target goes on
  // The weights a new run starts from (config key init_from, resolved: resolve_init_from in run.h), or empty. The
  // command loads them into a new run's model; the trainer loads them again when a resume finds no checkpoint.
  std::string init_from;
  bool quiet = false;
  // A step whose loss or gradient holds a NaN or Inf stops the run with an Error naming the step and the
  // first non-finite tensor; with skip_nonfinite the step's update is skipped and counted instead.
  bool skip_nonfinite = false;
  // The forward passes (training and evaluation) in float32 or under bfloat16 autocast; the loss, the weights and
  // the optimizer state stay float32 either way.
  Precision precision = Precision::fp32;
  // Where the model, its optimizer state and every batch live (config key `device`): train() moves the model there
  // before it makes the optimizer; checkpoints are written from the CPU copies, so they resume on any device.
  c10::Device device = c10::Device(c10::kCPU);
  std::map<std::string, std::string> description;  // extra fields for summary.json (model, mixers, ...)
  // The model's construction as JSON (its spec, mixers and sizes: Python's seqmix.Model arguments), written into
  // every checkpoint record so that a model can be rebuilt from a run without its task (the pip package does).
  std::string model_record;
  // Data parallel over the communicator's ranks (null: one process). batch_size stays the global batch:
  // rank r takes rows [r b, (r+1) b) of every batch, b = batch_size / world size, and gradients are averaged
  // over the ranks, so the run follows one process's trajectory with the same batch and resumes with any
  // world size. Weights start from rank 0's; the test set is split by batches; only rank 0 writes out_dir.
  std::shared_ptr<dist::Communicator> communicator;
  // Called after every optimizer step with the number of steps done (tests use it to interrupt a run).
  std::function<void(int64_t)> after_step;
};

using Metrics = std::map<std::string, double>;

struct TrainSummary {
  Metrics final_metrics;  // at the last evaluation
  Metrics best_metrics;   // at the evaluation with the best primary metric
  int64_t best_step = 0;
  int64_t steps_done = 0;
  bool stopped_early = false;
  int64_t skipped_nonfinite = 0;  // steps skipped for a non-finite loss or gradient
  int64_t parameters = 0;
  double wall_seconds = 0;
  int stopped_by_signal = 0;  // SIGINT or SIGTERM stopped the run after steps_done (checkpointed), else 0
};

// Evaluates model on the task's test set (no gradients), its forward in `precision`: the task's metrics plus
// "loss". With a communicator, rank r evaluates the batches i with i mod world_size = r and the sums are combined,
// which gives what one process evaluating every batch reports.
Metrics evaluate(SequenceModelImpl& model, Task& task, dist::Communicator* communicator = nullptr,
                 Precision precision = Precision::fp32);

// The model's output for `inputs` with its forward in `precision`, in float32 (or float64, as computed) for the
// loss and metrics.
torch::Tensor run_model(SequenceModelImpl& model, const torch::Tensor& inputs, const torch::Tensor& sequence_starts,
                        Precision precision);

TrainSummary train(SequenceModelImpl& model, Task& task, const TrainConfig& config);

// Throws Error naming train.batch_size when one training step of batch_size examples cannot fit in this machine's
// memory: it holds at least the batch's inputs and the model's outputs with their gradients (float32), a bound
// that needs no allocation. train() checks it first; `seqmix train` checks it before it writes the run folder.
void check_batch_fits_in_memory(const Task& task, int64_t batch_size);

}  // namespace seqmix
