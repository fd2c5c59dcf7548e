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

namespace {

// One call of train(), as named steps: start (a new run, or a resumed one), one optimizer step, the interval's log
// line, an evaluation, a checkpoint, and the summary; run() is the loop that orders them.
class TrainingRun {
 public:
  TrainingRun(SequenceModelImpl& model, Task& task, const TrainConfig& config);
  TrainSummary run();

 private:
  // What a step leaves for its log line.
  struct StepOutcome {
    double lr = 0, grad_norm = 0;
    at::Tensor outputs;  // the step's forward, for the training metrics of the log line
    Batch batch;
  };

  void check_config() const;
  void start_or_resume();
  StepOutcome step();
  void skip_or_stop(int64_t step, const std::string& nonfinite);
  void update(const StepOutcome& s, double loss, double aux, double scored);
  void log_interval(const StepOutcome& s);
  Metrics evaluation(int64_t step, double lr, double grad_norm);
  void checkpoint();
  TrainSummary summary(int stopped_by_signal);
  void log(const nlohmann::json& j) {
    if (metrics_log_) metrics_log_->append_line(j.dump());
  }

  SequenceModelImpl& model_;
  Task& task_;
  const TrainConfig& config_;
  dist::Communicator* communicator_;
  int64_t world_, rank_, shard_;  // processes, this one's rank, its rows of every global batch
  bool writing_, quiet_;          // only rank 0 writes the run directory and prints
  fs::path run_dir_, metrics_path_;
  Clock::time_point wall_start_ = Clock::now();
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  TrainerState state_;
  std::unique_ptr<dist::GradientAverager> averager_;
  std::unique_ptr<AppendLog> metrics_log_;  // every line checked; a failed one stops the run, the log stays whole
  Schedule schedule_;
  Progress progress_;
  std::string metric_, select_;  // the task's metric; what picks the best evaluation (it, or the loss)
  bool higher_, select_higher_;
  // The log interval: its losses continue the checkpoint's (a resumed run's first line averages the same steps);
  // its speeds count this process's steps.
  Clock::time_point interval_start_;
  int64_t interval_tokens_ = 0, interval_steps_ = 0;
  double interval_loss_ = 0, interval_aux_ = 0, interval_scored_ = 0;
  bool token_targets_ = false;          // token targets: scored positions per second are logged
  std::string scored_name_;             // scored_tokens_per_s or scored_sequences_per_s
};

TrainingRun::TrainingRun(SequenceModelImpl& model, Task& task, const TrainConfig& config)
    : model_(model),
      task_(task),
      config_(config),
      communicator_(config.communicator.get()),
      world_(communicator_ ? communicator_->world_size() : 1),
      rank_(communicator_ ? communicator_->rank() : 0),
      shard_(config.batch_size / std::max<int64_t>(1, world_)),
      writing_(!config.out_dir.empty() && rank_ == 0),
      quiet_(config.quiet || rank_ != 0),
      run_dir_(config.out_dir),
      metrics_path_(run_dir_ / "metrics.jsonl"),
      schedule_{config.optimizer.lr, config.min_lr, config.warmup_steps, config.steps,
                std::max<int64_t>(1, config.schedule_stage)},
      progress_(config.steps, 0),
      metric_(task.primary_metric()),
      select_(config.select_by.empty() ? metric_ : "loss"),
      higher_(task.higher_is_better()),
      select_higher_(config.select_by.empty() ? higher_ : false) {
  check_config();
  start_or_resume();
}

void TrainingRun::check_config() const {
  if (config_.steps < 1) throw Error("train: steps must be >= 1");
  if (config_.batch_size < 1) throw Error("train: batch size must be >= 1");
  check_batch_fits_in_memory(task_, config_.batch_size);
  if (config_.resume && config_.out_dir.empty()) throw Error("train: resuming needs a run directory");
  if (!config_.select_by.empty() && config_.select_by != "loss")
    throw Error("train: select_by must be empty (the task's metric) or 'loss'");
  if (config_.batch_size % world_ != 0)
    throw Error("train: the batch size " + std::to_string(config_.batch_size) + " does not split evenly over " +
                std::to_string(world_) + " processes; choose a multiple of " + std::to_string(world_));
}

// The model on its device, the optimizer, a resumed run's checkpoint, every rank on rank 0's weights, the log.
void TrainingRun::start_or_resume() {
  model_.to(config_.device);  // before the optimizer, whose state is made beside each parameter
  optimizer_ = make_adamw(model_, config_.optimizer);
  if (config_.resume) {
    // A run stopped before its first checkpoint starts again from step 0: its weights come from the seed
    // and its batches from the step, so that is the same run.
    // Every rank reads the checkpoint (the optimizer state too, which is the same on every rank).
    // A directory with no checkpoint and no log is a run that has not started (seqmix train --nproc).
    // Everything is checked before anything in the folder changes: its layout, the checkpoint, the init weights.
    check_resumable_folder(run_dir_);
    const bool from_checkpoint = load_checkpoint(config_.out_dir, model_, optimizer_.get(), state_);
    if (!from_checkpoint && !config_.init_from.empty()) load_init_from(config_.init_from, model_);
    if (!from_checkpoint && !quiet_ && fs::exists(metrics_path_))
      std::printf("run %s has no checkpoint yet: starting again from step 0\n", config_.out_dir.c_str());
    if (config_.extend) state_.stopped_early = false;
    if (writing_) {
      truncate_metrics_log(metrics_path_, state_.step);
      remove_stale_temporaries(config_.out_dir);  // the files of writes a kill cut short
      remove_stale_temporaries((run_dir_ / "checkpoints").string());
    }
  }
  if (communicator_) {
    communicator_->check_same(model_.parameter_count(),
                              "the number of model parameters (every rank must build the same model)");
    communicator_->check_same(state_.step, "the step to start from");
    // Every rank starts from rank 0's weights and buffers.
    std::vector<at::Tensor> tensors = model_.parameters();
    for (const auto& buffer : model_.buffers()) tensors.push_back(buffer);
    {
      torch::NoGradGuard no_grad;
      communicator_->broadcast(tensors, "the initial weights");
    }
    averager_ = std::make_unique<dist::GradientAverager>(config_.communicator, model_.parameters());
  }
  if (writing_) {
    fs::create_directories(run_dir_);
    metrics_log_ = std::make_unique<AppendLog>(metrics_path_.string());
  }
  progress_ = Progress(config_.steps, state_.step);
  progress_.set_evaluation_schedule(config_.eval_every);
  interval_steps_ = state_.interval_steps;
  interval_loss_ = state_.interval_loss;
  interval_aux_ = state_.interval_aux;
}

// One optimizer step: this rank's rows of the step's batch, the loss (averaged over the ranks), the gradient
// (averaged, clipped), and the update; a NaN or Inf in the loss or a gradient stops the run, or with
// skip_nonfinite skips the update.
TrainingRun::StepOutcome TrainingRun::step() {
  const int64_t step = state_.step;
  StepOutcome s;
  s.lr = schedule_.lr_at(step);
  set_learning_rate(*optimizer_, s.lr);
  s.batch = task_.train_batch(step, config_.batch_size);
  if (world_ > 1) s.batch = s.batch.rows(rank_ * shard_, (rank_ + 1) * shard_);
  s.batch = s.batch.to(config_.device);
  optimizer_->zero_grad();
  s.outputs = run_model(model_, s.batch.inputs, s.batch.sequence_starts, config_.precision);
  auto loss = task_.loss(s.outputs, s.batch);
  // The model's auxiliary loss (MoE load balance) joins the objective; the logged loss is the task's.
  const auto aux = model_.auxiliary_loss();
  const double local_loss = loss.item<double>();
  const double local_aux = aux.defined() ? aux.item<double>() : 0.0;
  // Token tasks: the positions scored this step (padding and unscored positions aside), for scored_tokens_per_s;
  // classification (one label per sequence, targets [B]): the sequences, for scored_sequences_per_s.
  token_targets_ = s.batch.targets.scalar_type() == torch::kLong;
  scored_name_ = s.batch.targets.dim() == 1 ? "scored_sequences_per_s" : "scored_tokens_per_s";
  const double local_scored = token_targets_ ? (s.batch.targets != kIgnoreIndex).sum().item<double>() : 0.0;
  // The mean over the ranks: what is logged, and non-finite on every rank when it is on one.
  double loss_value = local_loss, aux_value = local_aux, scored = local_scored;
  if (communicator_) {
    auto losses = torch::tensor({local_loss, local_aux, local_scored}, torch::kFloat64);
    communicator_->all_reduce_sum(losses, "the loss");
    loss_value = losses[0].item<double>() / static_cast<double>(world_);
    aux_value = losses[1].item<double>() / static_cast<double>(world_);
    scored = losses[2].item<double>();
  }
  std::string nonfinite;
  if (!std::isfinite(loss_value) || !std::isfinite(aux_value)) {
    nonfinite = std::isfinite(local_loss) && std::isfinite(local_aux)
                    ? "the loss on another rank is not finite (that rank names the tensor)"
                    : first_nonfinite_of_forward(model_, s.outputs, local_loss, local_aux);
  } else {
    (aux.defined() ? loss + aux : loss).backward();
    if (averager_) averager_->average();
    s.grad_norm = global_grad_norm(model_);
    if (!std::isfinite(s.grad_norm)) nonfinite = first_nonfinite_gradient(model_);
  }
  if (nonfinite.empty())
    update(s, loss_value, aux_value, scored);
  else
    skip_or_stop(step, nonfinite);
  return s;
}

// A step whose loss or gradient is not finite: an error naming it, or with skip_nonfinite a step without update.
void TrainingRun::skip_or_stop(int64_t step, const std::string& nonfinite) {
  const std::string what = "train: step " + std::to_string(step + 1) + ": " + nonfinite;
  if (!config_.skip_nonfinite) throw Error(what + " (--skip-nonfinite skips such steps)");
  if (!parameters_finite(model_)) throw Error(what + "; skipping steps cannot help once a parameter is not finite");
  optimizer_->zero_grad();
  state_.skipped_nonfinite += 1;
  state_.step = step + 1;
  log({{"step", state_.step}, {"split", "train"}, {"skipped_nonfinite", state_.skipped_nonfinite}, {"reason", nonfinite}});
  if (!quiet_) progress_.line(what + ": skipped (" + std::to_string(state_.skipped_nonfinite) + " so far)");
}

// The gradient clipped to grad_clip, the optimizer's update, and the step counted into the log interval.
void TrainingRun::update(const StepOutcome& s, double loss, double aux, double scored) {
  if (config_.grad_clip > 0 && s.grad_norm > config_.grad_clip) {
    torch::NoGradGuard no_grad;
    const double scale = config_.grad_clip / (s.grad_norm + 1e-6);
    for (auto& p : model_.parameters())
      if (p.grad().defined()) p.grad().mul_(scale);
  }
  optimizer_->step();
  state_.step += 1;
  interval_loss_ += loss;
  interval_aux_ += aux;
  interval_steps_ += 1;
  interval_tokens_ += config_.batch_size * s.batch.inputs.size(1);  // the global batch's positions, padding included
  interval_scored_ += scored;
}

// The log interval's line: its mean loss, the last step's training metrics, speeds; then a new interval.
void TrainingRun::log_interval(const StepOutcome& s) {
  const double tps = static_cast<double>(interval_tokens_) / std::max(1e-9, seconds_since(interval_start_));
  MetricSums train_sums;
  {
    torch::NoGradGuard no_grad;
    task_.add_metrics(s.outputs.detach(), s.batch, train_sums);
  }
  if (communicator_) train_sums = dist::all_reduce_metric_sums(*communicator_, train_sums);
  Metrics train_metrics = train_sums.values();
  nlohmann::json j = to_json(train_metrics);
  j["step"] = state_.step;
  j["split"] = "train";
  j["loss"] = interval_loss_ / static_cast<double>(interval_steps_);
  if (model_.auxiliary_loss().defined()) j["aux_loss"] = interval_aux_ / static_cast<double>(interval_steps_);
  j["lr"] = s.lr;
  j["grad_norm"] = s.grad_norm;
  j["tokens_per_s"] = tps;
  if (token_targets_) j[scored_name_] = interval_scored_ / std::max(1e-9, seconds_since(interval_start_));
  log(j);
  if (!quiet_)
    progress_.update(state_.step, interval_loss_ / static_cast<double>(interval_steps_), metric_,
                     train_metrics.count(metric_) ? train_metrics[metric_] : NAN, tps);
  interval_start_ = Clock::now();
  interval_tokens_ = interval_steps_ = 0;
  interval_loss_ = interval_aux_ = interval_scored_ = 0;
}

// The test set's metrics after `step`, the best evaluation so far, and their log line. lr and grad_norm are those
// of the step just taken; tokens_per_s is the evaluation's own throughput.
Metrics TrainingRun::evaluation(int64_t step, double lr, double grad_norm) {
  const auto eval_start = Clock::now();
  Metrics m = evaluate(model_, task_, communicator_, config_.precision);
  progress_.evaluated(seconds_since(eval_start));  // the ETA counts the evaluations still to come
  const double eval_tokens = static_cast<double>(task_.test_set().size() * task_.seq_len());
  state_.final_metrics = m;
  if (m.count(select_) && (state_.best_metrics.empty() || better(m[select_], state_.best_metrics[select_], select_higher_))) {
    state_.best_metrics = m;
    state_.best_step = step;
  }
  nlohmann::json j = to_json(m);
  j["step"] = step;
  j["split"] = "test";
  j["lr"] = lr;
  j["grad_norm"] = grad_norm;
  j["tokens_per_s"] = eval_tokens / std::max(1e-9, seconds_since(eval_start));
  log(j);
  if (!quiet_) {
    char buf[200];
    int n = std::snprintf(buf, sizeof buf, "eval step %lld: loss %.4f", static_cast<long long>(step),
                          m.count("loss") ? m["loss"] : NAN);
    if (metric_ != "loss")
      std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), "  %s %.4f", metric_.c_str(),
                    m.count(metric_) ? m[metric_] : NAN);
    progress_.line(buf);
  }
  return m;
}

void TrainingRun::checkpoint() {
  if (!writing_) return;
  TrainerState s = state_;
  s.wall_seconds = state_.wall_seconds + seconds_since(wall_start_);
  s.interval_steps = interval_steps_;
  s.interval_loss = interval_loss_;
  s.interval_aux = interval_aux_;
  save_checkpoint(config_.out_dir, model_, *optimizer_, s, config_.keep_checkpoints, config_.model_record);
}

// The run's summary, and summary.json when the run is over (an interrupted run is not: no summary yet).
TrainSummary TrainingRun::summary(int stopped_by_signal) {
  TrainSummary summary;
  summary.stopped_by_signal = stopped_by_signal;
  summary.final_metrics = state_.final_metrics;
  summary.best_metrics = state_.best_metrics;
  summary.best_step = state_.best_step;
  summary.steps_done = state_.step;
  summary.stopped_early = state_.stopped_early;
  summary.skipped_nonfinite = state_.skipped_nonfinite;
  summary.parameters = model_.parameter_count();
  summary.wall_seconds = state_.wall_seconds + seconds_since(wall_start_);
  if (writing_ && stopped_by_signal == 0) {
    nlohmann::json s;
    s["task"] = task_.resolved_spec();
    s["metric"] = metric_;
    for (const auto& [k, v] : config_.description) s[k] = v;
    s["final"] = to_json(summary.final_metrics);
    s["best"] = to_json(summary.best_metrics);
    s["best_step"] = summary.best_step;
    s["steps"] = summary.steps_done;
    s["stopped_early"] = summary.stopped_early;
    s["skipped_nonfinite"] = summary.skipped_nonfinite;
    s["parameters"] = summary.parameters;
    s["processes"] = world_;
    s["wall_seconds"] = summary.wall_seconds;
    write_file_atomically((run_dir_ / "summary.json").string(), s.dump(2) + "\n");
  }
  return summary;
}

// Steps until the last, the target or a stop signal; after each, as due: the log line, an evaluation (and the
// early stop at the target), a checkpoint.
TrainSummary TrainingRun::run() {
  const int64_t checkpoint_every = config_.checkpoint_every > 0 ? config_.checkpoint_every : config_.eval_every;
  int stopped_by_signal = 0;
  model_.train();
  interval_start_ = Clock::now();
  while (state_.step < config_.steps && !state_.stopped_early) {
    const StepOutcome s = step();
    const bool last = state_.step == config_.steps;
    // A log interval made only of skipped steps has nothing to report.
    if (interval_steps_ > 0 && (state_.step % std::max<int64_t>(1, config_.log_every) == 0 || last)) log_interval(s);
    if (last || (config_.eval_every > 0 && state_.step % config_.eval_every == 0)) {
      Metrics m = evaluation(state_.step, s.lr, s.grad_norm);
      if (config_.target > 0 && m.count(metric_) &&
          (higher_ ? m[metric_] >= config_.target : m[metric_] <= config_.target) && !last) {
        state_.stopped_early = true;
        if (!quiet_) progress_.line("target " + metric_ + " reached: stopping early");
      }
    }
    const bool checkpointed =
        last || state_.stopped_early || (checkpoint_every > 0 && state_.step % checkpoint_every == 0);
    if (checkpointed) checkpoint();
    if (config_.after_step) config_.after_step(state_.step);
    // Ctrl-C or kill (one process): stop after this step with a checkpoint of it, so --resume continues from here.
    if (!communicator_ && !last && !state_.stopped_early && stop_signal() != 0) {
      if (!checkpointed) checkpoint();
      stopped_by_signal = stop_signal();
      break;
    }
  }
  progress_.finish();
  return summary(stopped_by_signal);
}

}  // namespace

TrainSummary train(SequenceModelImpl& model, Task& task, const TrainConfig& config) {
  return TrainingRun(model, task, config).run();
}

}  // namespace seqmix
