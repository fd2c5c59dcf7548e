#pragma once
// Checkpoints of a run: checkpoints/step-<N>.safetensors (model parameters and buffers, optimizer
// state) and checkpoints/step-<N>.json (step, data cursor, RNG state, best/final metrics, and the size
// and checksum of the tensors file). Both are written atomically, tensors first; the JSON is the commit
// record, so a checkpoint exists only once both are complete. The last K are kept.
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <map>
#include <string>
#include <vector>

namespace seqmix {

struct TrainerState {
  int64_t step = 0;  // optimizer steps done; also the data cursor (the next training batch index)
  std::map<std::string, double> final_metrics, best_metrics;
  int64_t best_step = 0;
  bool stopped_early = false;
  int64_t skipped_nonfinite = 0;  // steps skipped for a non-finite loss or gradient (TrainConfig::skip_nonfinite)
  double wall_seconds = 0;  // training time before this process (resumed runs add theirs)
  // The log interval in progress (the steps since the last train log line and their loss sums), so the first
  // line after a resume averages the same steps as an uninterrupted run's (its speeds count this process's steps).
  int64_t interval_steps = 0;
  double interval_loss = 0, interval_aux = 0;
};

// Steps of the complete checkpoints in run_dir, ascending.
std::vector<int64_t> list_checkpoints(const std::string& run_dir);
void save_checkpoint(const std::string& run_dir, torch::nn::Module& model, torch::optim::AdamW& optimizer,
                     const TrainerState& state, int64_t keep_last);
// Loads the checkpoint at `step` (the latest when step < 0) into model, optimizer and state and
// restores the RNG. Returns false when the run has no checkpoint; throws Error when the checkpoint is
// corrupt, truncated or does not fit the model (nothing is modified on disk).
bool load_checkpoint(const std::string& run_dir, torch::nn::Module& model, torch::optim::AdamW* optimizer,
                     TrainerState& state, int64_t step = -1);

// The model's parameters and buffers from a safetensors file any writer made (Python's
// safetensors.torch.save_file, a checkpoint's tensors file): its metadata must say format=seqmix-checkpoint-1
// and it must hold model.<name> for every parameter and buffer, of the model's shape and dtype (other tensors
// are ignored). Throws Error naming the file, with nothing changed, when it is not such a file or does not fit.
void load_model_weights(const std::string& path, torch::nn::Module& model);
// Writes the model's parameters and buffers (model.<name>, format=seqmix-checkpoint-1) to path, atomically: the
// file load_model_weights and `seqmix eval --weights` read. Throws Error naming the path when it cannot be written.
void save_model_weights(const std::string& path, torch::nn::Module& model);

// 64-bit FNV-1a of bytes (the checksum stored in the JSON record).
uint64_t fnv1a64(const std::string& bytes);

}  // namespace seqmix
