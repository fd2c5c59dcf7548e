#pragma once
// A run, from its configuration to its parts: the schema of config.yaml, and building the task, the
// model (seeded) and the trainer settings it describes.
#include <memory>
#include <string>
#include <vector>

#include "seqmix/io/config.h"
#include "seqmix/layers/mixer_spec.h"
#include "seqmix/models/model_factory.h"
#include "seqmix/models/sequence_model.h"
#include "seqmix/tasks/task.h"
#include "seqmix/train/trainer.h"

namespace seqmix {

// Keys of config.yaml: task, mixer (list), model, seed, threads, train.* (steps, batch_size, lr, ...).
std::vector<OptionInfo> run_config_schema();

// The trainer settings of a run config's train.* keys (and device, init_from). TrainConfig's own defaults are this
// schema's (tests/train/run_config_test.cpp holds them equal), so the CLI, YAML configs and C++ callers of train()
// start from one set.
TrainConfig train_config_from(const Config& config);

struct Run {
  std::unique_ptr<Task> task;
  SequenceModel model;
  TrainConfig train;
  std::string model_spec;  // resolved: the task's default model when the config names none
  std::vector<MixerSpec> mixers;  // parsed once, from the config
};

// What a model built for `task` is sized by (vocabulary or features, lengths), around `mixers`.
ModelContext model_context_for(const Task& task, std::vector<MixerSpec> mixers);

// Builds the run a config describes. Fills in the resolved model and mixer specs in `config`, so that
// config.to_yaml() is the complete, reproducible description. `task`, when given, is the task already built
// from config's task spec (a caller that needed it first, to read its default model), so it is not built twice.
Run build_run(Config& config, const std::string& out_dir, std::unique_ptr<Task> task = nullptr);

// The configuration a run directory holds: its config.yaml, with a text task pointed at the run's saved
// tokenizer.model so the BPE is not trained again. Throws Error "run directory DIR has no config.yaml" +
// `missing_config_reason` when there is none.
Config run_directory_config(const std::string& run_dir, const std::string& missing_config_reason);

// The run a run directory holds, for eval and generate: its config.yaml with `threads` replaced, and the
// model with the weights of its checkpoint at `step` (-1 = the latest); `step_loaded` gets that step.
// A text run reads the tokenizer.model it saved (run_directory_config). With `weights`, a safetensors file of
// the model's tensors (load_model_weights: e.g. written by Python's safetensors.torch.save_file), the model takes
// those instead of a checkpoint's and step_loaded is -1. Throws Error when the directory has no config.yaml or
// no checkpoint, or the weights are not a seqmix checkpoint of this model.
// task_options ("KEY=VALUE", e.g. heldout=test) replace options of the run's task spec (`seqmix eval --task-option`).
// The model is loaded onto `device` ("cpu", "cuda", "cuda:N"), whatever device the run trained on.
Run load_run(const std::string& run_dir, int threads, int64_t step, int64_t& step_loaded,
             const std::string& weights = "", const std::vector<std::string>& task_options = {},
             const std::string& device = "cpu");

// `seqmix train --match-params REF [--match-option KEY]`: sets the integer option KEY of config (model.<key>, e.g.
// the default model.dim, or mixer.<key> on every mixer) to the value whose model's parameter count is closest to the
// reference's: REF is a config file (its run's model) or mixer spec(s) that replace this run's mixers. Parameters
// grow with a width-like option, so the value is found by doubling then bisection over the values that build a
// model. Returns what it chose ("model.dim=72 gives 401,234 parameters, the reference ... 400,890 (+0.09%)");
// throws Error saying so when the closest is more than 0.5% away.
std::string match_parameters(Config& config, const std::string& reference, const std::string& option);

// init_from (`seqmix train --init-from`): the value as a new run records it, so a resume loads the same weights from
// any directory: a run folder as ABSOLUTE_PATH@STEP (its latest checkpoint's step unless RUN@STEP names one), a
// weights file as its absolute path. Throws Error naming the value when it is neither, or the run has no such
// checkpoint.
std::string resolve_init_from(const std::string& value);
// Loads the weights a resolved init_from names into model (nothing else: not the optimizer, not the RNG). Throws
// Error starting "init_from <value>: " when they cannot be read or do not fit the model (which is then unchanged).
void load_init_from(const std::string& resolved, torch::nn::Module& model);

}  // namespace seqmix
