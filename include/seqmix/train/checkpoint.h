#pragma once
// Checkpoints of a run (format version 2): checkpoints/step-<N>.safetensors (the model's parameters and buffers
// under their own names, metadata format=pt: safetensors.torch.load_file + load_state_dict read it),
// checkpoints/step-<N>.optimizer.safetensors (AdamW's state: <name>.exp_avg, .exp_avg_sq, .step) and
// checkpoints/step-<N>.json (format, version, step, data cursor, RNG state, best/final metrics, and each file's
// size and SHA-256, as sha256sum prints it). All are written atomically, tensors first; the JSON is the commit
// record, so a checkpoint exists only once every file is complete. The last K are kept. Version-1 checkpoints
// (one tensors file of model.* and optimizer.*, an FNV-1a checksum) are still read. docs/reliability.md.
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
// model_record (JSON, TrainConfig::model_record), when given, goes into the checkpoint's record as "model".
void save_checkpoint(const std::string& run_dir, torch::nn::Module& model, torch::optim::AdamW& optimizer,
                     const TrainerState& state, int64_t keep_last, const std::string& model_record = "");
// Loads the checkpoint at `step` (the latest when step < 0) into model, optimizer and state and
// restores the RNG. Returns false when the run has no checkpoint; throws Error when the checkpoint is
// corrupt, truncated or does not fit the model (nothing is modified on disk).
bool load_checkpoint(const std::string& run_dir, torch::nn::Module& model, torch::optim::AdamW* optimizer,
                     TrainerState& state, int64_t step = -1);

// Loads only the model's weights of the checkpoint at `step` (the latest when step < 0), checked like
// load_checkpoint, leaving the RNG alone (`--init-from`). Returns the step loaded; throws Error when the run has no
// such checkpoint or it does not fit the model (the model is then unchanged).
int64_t load_checkpoint_weights(const std::string& run_dir, torch::nn::Module& model, int64_t step = -1);

// The model's parameters and buffers from a safetensors file any writer made (Python's
// safetensors.torch.save_file(model.state_dict(), path, metadata={"format": "pt"}), a checkpoint's weights file):
// its metadata must say format=pt and it must hold every parameter and buffer under its name, of the model's
// shape and dtype (other tensors are ignored); a version-1 file (format=seqmix-checkpoint-1, model.<name>) is read
// too. Throws Error naming the file, with nothing changed, when it is not such a file or does not fit.
void load_model_weights(const std::string& path, torch::nn::Module& model);
// Writes the model's parameters and buffers (their own names, format=pt) to path, atomically: the file
// load_model_weights and `seqmix eval --weights` read. Throws Error naming the path when it cannot be written.
void save_model_weights(const std::string& path, torch::nn::Module& model);

}  // namespace seqmix
