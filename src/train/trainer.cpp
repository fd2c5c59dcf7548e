#include "seqmix/train/trainer.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "seqmix/dist/communicator.h"
#include "seqmix/dist/gradient_averager.h"
#include "seqmix/dist/metric_reduction.h"
#include "seqmix/io/append_log.h"
#include "seqmix/io/atomic_file.h"
#include "seqmix/io/interrupt.h"
#include "seqmix/io/runtime.h"
#include "seqmix/io/error.h"
#include "seqmix/train/checkpoint.h"
#include "seqmix/train/progress.h"
#include "seqmix/train/run.h"
#include "seqmix/train/schedule.h"

namespace seqmix {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

bool better(double a, double b, bool higher) { return higher ? a > b : a < b; }

nlohmann::json to_json(const Metrics& m) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

// Keeps the metrics.jsonl lines of steps <= step: a resumed run rewrites what the interrupted one
// logged after its checkpoint.
void truncate_metrics_log(const fs::path& path, int64_t step) {
  if (!fs::exists(path)) return;
  std::istringstream in(read_file(path.string()));
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) continue;  // a torn last line of a killed run
    if (!j.contains("step") || !j["step"].is_number_integer() || j["step"].get<int64_t>() <= step) kept += line + "\n";
  }
  write_file_atomically(path.string(), kept);
}

double global_grad_norm(SequenceModelImpl& model) {
  double sq = 0;
  for (const auto& p : model.parameters())
    if (p.grad().defined()) sq += p.grad().to(torch::kDouble).square().sum().item<double>();
  return std::sqrt(sq);
}

// What is not finite in a step whose loss is not: the first parameter, else the model's output, else the
// loss itself. Parameters come first because once one is non-finite everything after it is.
std::string first_nonfinite_of_forward(SequenceModelImpl& model, const torch::Tensor& output, double loss_value,
                                       double aux_value) {
  torch::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters())
    if (!torch::isfinite(item.value()).all().item<bool>()) return "parameter '" + item.key() + "' is not finite";
  if (!torch::isfinite(output).all().item<bool>()) return "the model output is not finite";
  if (!std::isfinite(loss_value)) return "the loss is " + std::to_string(loss_value);
  return "the auxiliary (load-balance) loss is " + std::to_string(aux_value);
}

// The first parameter whose gradient holds a NaN or an Inf.
std::string first_nonfinite_gradient(SequenceModelImpl& model) {
  torch::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters()) {
    const auto& grad = item.value().grad();
    if (grad.defined() && !torch::isfinite(grad).all().item<bool>())
      return "the gradient of parameter '" + item.key() + "' is not finite";
  }
  return "the gradient norm is not finite";  // the squares overflowed: every entry is finite
}

bool parameters_finite(SequenceModelImpl& model) {
  torch::NoGradGuard no_grad;
  for (const auto& p : model.parameters())
    if (!torch::isfinite(p).all().item<bool>()) return false;
  return true;
}

// A run folder a resume may write into: each of its files, where present, of the kind the run writes (a damaged
// folder is one clear error before the log is truncated or a checkpoint written).
void check_resumable_folder(const fs::path& run_dir) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) throw Error("run " + run_dir.string() + " is not a folder");
  for (const char* name : {"config.yaml", "metrics.jsonl", "summary.json"}) {
    const fs::path file = run_dir / name;
    if (fs::exists(fs::symlink_status(file, ec)) && !fs::is_regular_file(file, ec))
      throw Error("run " + run_dir.string() + " is damaged: " + file.string() + " is not a regular file");
  }
  const fs::path checkpoints = run_dir / "checkpoints";
  if (fs::exists(fs::symlink_status(checkpoints, ec)) && !fs::is_directory(checkpoints, ec))
    throw Error("run " + run_dir.string() + " is damaged: " + checkpoints.string() +
                " is not a folder; move it away to resume");
}

}  // namespace

// Where the model's parameters live (the CPU for a model without any).
c10::Device device_of(SequenceModelImpl& model) {
  const auto parameters = model.parameters();
  return parameters.empty() ? c10::Device(c10::kCPU) : parameters.front().device();
}

torch::Tensor run_model(SequenceModelImpl& model, const torch::Tensor& inputs, const torch::Tensor& sequence_starts,
                        Precision precision) {
  const c10::Device device = device_of(model);
  const AutocastGuard autocast(precision, device.type());
  const auto out = model.run(inputs.to(device), sequence_starts.defined() ? sequence_starts.to(device) : sequence_starts);
  const auto type = out.scalar_type();
  return type == torch::kBFloat16 || type == torch::kHalf ? out.to(torch::kFloat) : out;
}

Metrics evaluate(SequenceModelImpl& model, Task& task, dist::Communicator* communicator, Precision precision) {
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const Batch& test = task.test_set();
  const int64_t bs = task.eval_batch_size();
  const int64_t world = communicator ? communicator->world_size() : 1;
  const int64_t rank = communicator ? communicator->rank() : 0;
  MetricSums sums;
  // The same batches as one process, dealt round-robin: per-batch metrics (MAD's macro recall) add up alike.
  for (int64_t b = 0, index = 0; b < test.size(); b += bs, ++index) {
    if (index % world != rank) continue;
    Batch batch = test.rows(b, std::min(test.size(), b + bs)).to(device_of(model));
    auto out = run_model(model, batch.inputs, batch.sequence_starts, precision);
    const double n = static_cast<double>(batch.size());
    sums.add("loss", task.loss(out, batch).item<double>() * n, n);
    task.add_metrics(out, batch, sums);
  }
  if (communicator) sums = dist::all_reduce_metric_sums(*communicator, sums);
  model.train(was_training);
  return sums.values();
}

void check_batch_fits_in_memory(const Task& task, int64_t batch_size) {
  const double inputs = static_cast<double>(task.seq_len()) * std::max<int64_t>(1, task.input_features());
  const double outputs = task.vocab_size() > 0
                             ? static_cast<double>(task.seq_len()) * task.vocab_size()
                             : static_cast<double>(std::max<int64_t>(1, task.output_len())) *
                                   std::max<int64_t>(1, task.output_features());
  const double bytes = 4.0 * static_cast<double>(batch_size) * (inputs + 2 * outputs);
  const int64_t memory = physical_memory_bytes();
  if (bytes > static_cast<double>(memory))
    throw Error("train.batch_size " + std::to_string(batch_size) + ": one step needs at least " + gigabytes(bytes) +
                " (the batch's inputs and the model's outputs with their gradients, float32), more than this "
                "machine's " + gigabytes(static_cast<double>(memory)) + " of memory; choose a smaller --batch-size");
}

TrainSummary train(SequenceModelImpl& model, Task& task, const TrainConfig& config) {
  if (config.steps < 1) throw Error("train: steps must be >= 1");
  if (config.batch_size < 1) throw Error("train: batch size must be >= 1");
  check_batch_fits_in_memory(task, config.batch_size);
  if (config.resume && config.out_dir.empty()) throw Error("train: resuming needs a run directory");
  if (!config.select_by.empty() && config.select_by != "loss")
    throw Error("train: select_by must be empty (the task's metric) or 'loss'");
  dist::Communicator* communicator = config.communicator.get();
  const int64_t world = communicator ? communicator->world_size() : 1;
  const int64_t rank = communicator ? communicator->rank() : 0;
  if (config.batch_size % world != 0)
    throw Error("train: the batch size " + std::to_string(config.batch_size) + " does not split evenly over " +
                std::to_string(world) + " processes; choose a multiple of " + std::to_string(world));
  const int64_t shard = config.batch_size / world;  // this rank's rows of every global batch
  const auto wall_start = Clock::now();
  const bool writing = !config.out_dir.empty() && rank == 0;  // only rank 0 writes the run directory
  const bool quiet = config.quiet || rank != 0;
  const fs::path run_dir(config.out_dir);
  const fs::path metrics_path = run_dir / "metrics.jsonl";

  model.to(config.device);  // before the optimizer, whose state is made beside each parameter
  auto optimizer = make_adamw(model, config.optimizer);
  TrainerState state;
  if (config.resume) {
    // A run stopped before its first checkpoint starts again from step 0: its weights come from the seed
    // and its batches from the step, so that is the same run.
    // Every rank reads the checkpoint (the optimizer state too, which is the same on every rank).
    // A directory with no checkpoint and no log is a run that has not started (seqmix train --nproc).
    // Everything is checked before anything in the folder changes: its layout, the checkpoint, the init weights.
    check_resumable_folder(run_dir);
    const bool from_checkpoint = load_checkpoint(config.out_dir, model, optimizer.get(), state);
    if (!from_checkpoint && !config.init_from.empty()) load_init_from(config.init_from, model);
    if (!from_checkpoint && !quiet && fs::exists(metrics_path))
      std::printf("run %s has no checkpoint yet: starting again from step 0\n", config.out_dir.c_str());
    if (config.extend) state.stopped_early = false;
    if (writing) {
      truncate_metrics_log(metrics_path, state.step);
      remove_stale_temporaries(config.out_dir);  // the files of writes a kill cut short
      remove_stale_temporaries((run_dir / "checkpoints").string());
    }
  }
  std::unique_ptr<dist::GradientAverager> averager;
  if (communicator) {
    communicator->check_same(model.parameter_count(), "the number of model parameters (every rank must build the same model)");
    communicator->check_same(state.step, "the step to start from");
    // Every rank starts from rank 0's weights and buffers.
    std::vector<at::Tensor> tensors = model.parameters();
    for (const auto& buffer : model.buffers()) tensors.push_back(buffer);
    {
      torch::NoGradGuard no_grad;
      communicator->broadcast(tensors, "the initial weights");
    }
    averager = std::make_unique<dist::GradientAverager>(config.communicator, model.parameters());
  }

  std::unique_ptr<AppendLog> metrics_log;  // every line checked; a failed one stops the run, the log stays whole
  if (writing) {
    fs::create_directories(run_dir);
    metrics_log = std::make_unique<AppendLog>(metrics_path.string());
  }
  auto log = [&](const nlohmann::json& j) {
    if (metrics_log) metrics_log->append_line(j.dump());
  };

  const Schedule schedule{config.optimizer.lr, config.min_lr, config.warmup_steps, config.steps,
                          std::max<int64_t>(1, config.schedule_stage)};
  Progress progress(config.steps, state.step);
  progress.set_evaluation_schedule(config.eval_every);
  const std::string metric = task.primary_metric();
  const bool higher = task.higher_is_better();
  const std::string select = config.select_by.empty() ? metric : "loss";
  const bool select_higher = config.select_by.empty() ? higher : false;
  const int64_t checkpoint_every = config.checkpoint_every > 0 ? config.checkpoint_every : config.eval_every;
  // The log interval's losses continue the checkpoint's (a resumed run's first line averages the same steps); its
  // speeds count this process's steps.
  int64_t interval_tokens = 0, interval_steps = state.interval_steps;
  double interval_loss = state.interval_loss, interval_aux = state.interval_aux, interval_scored = 0;
  int stopped_by_signal = 0;
  auto checkpoint = [&] {
    if (!writing) return;
    TrainerState s = state;
    s.wall_seconds = state.wall_seconds + seconds_since(wall_start);
    s.interval_steps = interval_steps;
    s.interval_loss = interval_loss;
    s.interval_aux = interval_aux;
    save_checkpoint(config.out_dir, model, *optimizer, s, config.keep_checkpoints, config.model_record);
  };

  // lr and grad_norm are those of the step just taken; tokens_per_s is the evaluation's own throughput.
  auto run_eval = [&](int64_t step, double lr, double grad_norm) {
    const auto eval_start = Clock::now();
    Metrics m = evaluate(model, task, communicator, config.precision);
    progress.evaluated(seconds_since(eval_start));  // the ETA counts the evaluations still to come
    const double eval_tokens = static_cast<double>(task.test_set().size() * task.seq_len());
    state.final_metrics = m;
    if (m.count(select) && (state.best_metrics.empty() || better(m[select], state.best_metrics[select], select_higher))) {
      state.best_metrics = m;
      state.best_step = step;
    }
    nlohmann::json j = to_json(m);
    j["step"] = step;
    j["split"] = "test";
    j["lr"] = lr;
    j["grad_norm"] = grad_norm;
    j["tokens_per_s"] = eval_tokens / std::max(1e-9, seconds_since(eval_start));
    log(j);
    if (!quiet) {
      char buf[200];
      int n = std::snprintf(buf, sizeof buf, "eval step %lld: loss %.4f", static_cast<long long>(step),
                            m.count("loss") ? m["loss"] : NAN);
      if (metric != "loss")
        std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), "  %s %.4f", metric.c_str(), m.count(metric) ? m[metric] : NAN);
      progress.line(buf);
    }
    return m;
  };

  model.train();
  auto interval_start = Clock::now();
  while (state.step < config.steps && !state.stopped_early) {
    const int64_t step = state.step;
    const double lr = schedule.lr_at(step);
    set_learning_rate(*optimizer, lr);
    Batch batch = task.train_batch(step, config.batch_size);
    if (world > 1) batch = batch.rows(rank * shard, (rank + 1) * shard);
    batch = batch.to(config.device);
    optimizer->zero_grad();
    auto out = run_model(model, batch.inputs, batch.sequence_starts, config.precision);
    auto loss = task.loss(out, batch);
    // The model's auxiliary loss (MoE load balance) joins the objective; the logged loss is the task's.
    const auto aux = model.auxiliary_loss();
    const double local_loss = loss.item<double>();
    const double local_aux = aux.defined() ? aux.item<double>() : 0.0;
    // Token tasks: the positions scored this step (padding and unscored positions aside), for scored_tokens_per_s;
    // classification (one label per sequence, targets [B]): the sequences, for scored_sequences_per_s.
    const bool token_targets = batch.targets.scalar_type() == torch::kLong;
    const char* scored_name = batch.targets.dim() == 1 ? "scored_sequences_per_s" : "scored_tokens_per_s";
    const double local_scored = token_targets ? (batch.targets != kIgnoreIndex).sum().item<double>() : 0.0;
    // The mean over the ranks: what is logged, and non-finite on every rank when it is on one.
    double loss_value = local_loss, aux_value = local_aux, scored = local_scored;
    if (communicator) {
      auto losses = torch::tensor({local_loss, local_aux, local_scored}, torch::kFloat64);
      communicator->all_reduce_sum(losses, "the loss");
      loss_value = losses[0].item<double>() / static_cast<double>(world);
      aux_value = losses[1].item<double>() / static_cast<double>(world);
      scored = losses[2].item<double>();
    }
    // A NaN or Inf in the loss or in a gradient stops the run, or with skip_nonfinite skips the update.
    std::string nonfinite;
    double grad_norm = 0;
    if (!std::isfinite(loss_value) || !std::isfinite(aux_value)) {
      nonfinite = std::isfinite(local_loss) && std::isfinite(local_aux)
                      ? "the loss on another rank is not finite (that rank names the tensor)"
                      : first_nonfinite_of_forward(model, out, local_loss, local_aux);
    } else {
      (aux.defined() ? loss + aux : loss).backward();
      if (averager) averager->average();
      grad_norm = global_grad_norm(model);
      if (!std::isfinite(grad_norm)) nonfinite = first_nonfinite_gradient(model);
    }
    if (!nonfinite.empty()) {
      const std::string what = "train: step " + std::to_string(step + 1) + ": " + nonfinite;
      if (!config.skip_nonfinite) throw Error(what + " (--skip-nonfinite skips such steps)");
      if (!parameters_finite(model)) throw Error(what + "; skipping steps cannot help once a parameter is not finite");
      optimizer->zero_grad();
      state.skipped_nonfinite += 1;
      state.step = step + 1;
      log({{"step", state.step}, {"split", "train"}, {"skipped_nonfinite", state.skipped_nonfinite}, {"reason", nonfinite}});
      if (!quiet) progress.line(what + ": skipped (" + std::to_string(state.skipped_nonfinite) + " so far)");
    } else {
      interval_aux += aux_value;
      if (config.grad_clip > 0 && grad_norm > config.grad_clip) {
        torch::NoGradGuard no_grad;
        const double scale = config.grad_clip / (grad_norm + 1e-6);
        for (auto& p : model.parameters())
          if (p.grad().defined()) p.grad().mul_(scale);
      }
      optimizer->step();
      state.step = step + 1;
      interval_loss += loss_value;
      interval_steps += 1;
      interval_tokens += config.batch_size * batch.inputs.size(1);  // the global batch's positions, padding included
      interval_scored += scored;
    }

    const bool last = state.step == config.steps;
    // A log interval made only of skipped steps has nothing to report.
    if (interval_steps > 0 && (state.step % std::max<int64_t>(1, config.log_every) == 0 || last)) {
      const double tps = static_cast<double>(interval_tokens) / std::max(1e-9, seconds_since(interval_start));
      MetricSums train_sums;
      {
        torch::NoGradGuard no_grad;
        task.add_metrics(out.detach(), batch, train_sums);
      }
      if (communicator) train_sums = dist::all_reduce_metric_sums(*communicator, train_sums);
      Metrics train_metrics = train_sums.values();
      nlohmann::json j = to_json(train_metrics);
      j["step"] = state.step;
      j["split"] = "train";
      j["loss"] = interval_loss / static_cast<double>(interval_steps);
      if (model.auxiliary_loss().defined()) j["aux_loss"] = interval_aux / static_cast<double>(interval_steps);
      j["lr"] = lr;
      j["grad_norm"] = grad_norm;
      j["tokens_per_s"] = tps;
      if (token_targets)
        j[scored_name] = interval_scored / std::max(1e-9, seconds_since(interval_start));
      log(j);
      if (!quiet)
        progress.update(state.step, interval_loss / static_cast<double>(interval_steps), metric,
                        train_metrics.count(metric) ? train_metrics[metric] : NAN, tps);
      interval_start = Clock::now();
      interval_tokens = interval_steps = 0;
      interval_loss = interval_aux = interval_scored = 0;
    }
    const bool eval_now = last || (config.eval_every > 0 && state.step % config.eval_every == 0);
    if (eval_now) {
      Metrics m = run_eval(state.step, lr, grad_norm);
      if (config.target > 0 && m.count(metric) && (higher ? m[metric] >= config.target : m[metric] <= config.target) &&
          !last) {
        state.stopped_early = true;
        if (!quiet) progress.line("target " + metric + " reached: stopping early");
      }
    }
    const bool checkpointed = last || state.stopped_early || (checkpoint_every > 0 && state.step % checkpoint_every == 0);
    if (checkpointed) checkpoint();
    if (config.after_step) config.after_step(state.step);
    // Ctrl-C or kill (one process): stop after this step with a checkpoint of it, so --resume continues from here.
    if (!communicator && !last && !state.stopped_early && stop_signal() != 0) {
      if (!checkpointed) checkpoint();
      stopped_by_signal = stop_signal();
      break;
    }
  }
  progress.finish();

  TrainSummary summary;
  summary.stopped_by_signal = stopped_by_signal;
  summary.final_metrics = state.final_metrics;
  summary.best_metrics = state.best_metrics;
  summary.best_step = state.best_step;
  summary.steps_done = state.step;
  summary.stopped_early = state.stopped_early;
  summary.skipped_nonfinite = state.skipped_nonfinite;
  summary.parameters = model.parameter_count();
  summary.wall_seconds = state.wall_seconds + seconds_since(wall_start);
  if (writing && stopped_by_signal == 0) {  // an interrupted run is not over: no summary yet
    nlohmann::json s;
    s["task"] = task.resolved_spec();
    s["metric"] = metric;
    for (const auto& [k, v] : config.description) s[k] = v;
    s["final"] = to_json(summary.final_metrics);
    s["best"] = to_json(summary.best_metrics);
    s["best_step"] = summary.best_step;
    s["steps"] = summary.steps_done;
    s["stopped_early"] = summary.stopped_early;
    s["skipped_nonfinite"] = summary.skipped_nonfinite;
    s["parameters"] = summary.parameters;
    s["processes"] = world;
    s["wall_seconds"] = summary.wall_seconds;
    write_file_atomically((run_dir / "summary.json").string(), s.dump(2) + "\n");
  }
  return summary;
}

}  // namespace seqmix
