#include "seqmix/train/run.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <filesystem>
#include <limits>

#include "seqmix/io/declaration.h"
#include "seqmix/io/error.h"
#include "seqmix/train/device.h"
#include "seqmix/io/printable.h"
#include "seqmix/io/runtime.h"
#include "seqmix/models/model_factory.h"
#include "seqmix/models/registry.h"
#include "seqmix/train/checkpoint.h"

namespace seqmix {

namespace {

// An option of the optimizer's settings (TrainConfig::optimizer), its default the struct's.
Field<TrainConfig> optimizer_real(const std::string& key, double OptimizerConfig::*member, std::string meaning,
                                  double min, double max = std::numeric_limits<double>::infinity()) {
  return Field<TrainConfig>::custom(OptionInfo::real(key, TrainConfig{}.optimizer.*member, std::move(meaning), min, max),
                                    [key, member](const Options& o, TrainConfig& t) { t.optimizer.*member = o.real(key); });
}

// The keys of the run config the trainer reads, each bound to its field of TrainConfig, whose defaults (trainer.h,
// optimizer.h) are the only ones: the YAML config, the command line's flags and --set, and every other door read
// these. init_from and device first (the top-level keys), then train.*.
std::vector<Field<TrainConfig>> trainer_fields() {
  using T = TrainConfig;
  std::vector<std::pair<std::string, Precision>> precisions;
  for (const auto& name : precision_names()) precisions.emplace_back(name, parse_precision(name, "train.dtype"));
  const std::vector<std::pair<std::string, std::string>> select_by = {{"metric", ""}, {"loss", "loss"}};
  return {
      Field<T>::text("init_from", &T::init_from,
                     "start from these weights: a run folder (its latest checkpoint; RUN@STEP for another) or a "
                     "safetensors weights file (format=pt); empty: the seed's"),
      Field<T>::custom(OptionInfo::text("device", T{}.device.str(),
                                        "where the model, optimizer state and batches live: cpu, cuda or cuda:N"),
                       [](const Options& o, T& t) { t.device = parse_device(o.text("device"), "device"); }),
      Field<T>::integer("train.steps", &T::steps, "optimizer steps", 1, 1e12),
      Field<T>::integer("train.batch_size", &T::batch_size, "examples per step", 1),
      optimizer_real("train.lr", &OptimizerConfig::lr, "peak learning rate", 0.0, 3.4e38),
      Field<T>::real("train.min_lr", &T::min_lr, "learning rate at the end of the cosine decay", 0.0, 3.4e38),
      Field<T>::integer("train.warmup", &T::warmup_steps, "linear warmup steps", 0),
      optimizer_real("train.weight_decay", &OptimizerConfig::weight_decay, "AdamW weight decay", 0.0, 3.4e38),
      Field<T>::custom(OptionInfo::flag("train.decay_vectors", T{}.optimizer.decay_vectors,
                                        "also decay norm weights and biases (MAD's single group)"),
                       [](const Options& o, T& t) { t.optimizer.decay_vectors = o.flag("train.decay_vectors"); }),
      optimizer_real("train.beta1", &OptimizerConfig::beta1, "AdamW beta1", 0.0, 0.999999),
      optimizer_real("train.beta2", &OptimizerConfig::beta2, "AdamW beta2", 0.0, 0.999999),
      optimizer_real("train.eps", &OptimizerConfig::eps, "AdamW epsilon", 0.0),
      Field<T>::real("train.grad_clip", &T::grad_clip, "max global gradient norm (0 = no clipping)", 0.0),
      Field<T>::integer("train.eval_every", &T::eval_every, "evaluate every N steps (0 = at the end only)", 0),
      Field<T>::integer("train.log_every", &T::log_every, "log every N steps", 1),
      Field<T>::real("train.target", &T::target, "stop once the task's metric reaches this (0 = never)"),
      Field<T>::choice("train.select_by", &T::select_by, select_by,
                       "which evaluation is 'best': the task's metric, or the lowest test loss (MAD)"),
      Field<T>::integer("train.schedule_stage", &T::schedule_stage,
                        "hold the learning rate within stages of N steps (MAD: an epoch)", 1),
      Field<T>::integer("train.checkpoint_every", &T::checkpoint_every,
                        "checkpoint every N steps (0 = at every evaluation)", 0),
      Field<T>::integer("train.keep_checkpoints", &T::keep_checkpoints, "checkpoints kept (the newest)", 1),
      Field<T>::flag("train.skip_nonfinite", &T::skip_nonfinite,
                     "skip and count steps whose loss or gradient is NaN or Inf (default: stop, naming it)"),
      Field<T>::choice("train.dtype", &T::precision, precisions,
                       "forward passes in fp32, or bf16 under autocast (weights, optimizer and checkpoints stay fp32)"),
  };
}

}  // namespace

std::vector<OptionInfo> run_config_schema() {
  const std::vector<OptionInfo> trainer = option_infos(trainer_fields());  // init_from, device, train.*
  std::vector<OptionInfo> schema = {
      OptionInfo::text("task", "mad.in_context_recall:seq_len=64,num_train=6400", "task spec (seqmix list)"),
      OptionInfo::list("mixer", {"softmax"}, "sequence-mixer specs, one per layer, cycled over the layers (none: dlinear)"),
      OptionInfo::text("model", "", "model spec; empty: the task's default model"),
      OptionInfo::integer("seed", 0, "seed of the model initialisation", 0),
      trainer[0],  // init_from
      OptionInfo::integer("threads", 0, "intra-op threads (0 = all hardware threads)", 0, 1024)};
  schema.insert(schema.end(), trainer.begin() + 1, trainer.end());
  return schema;
}

namespace {

// The model config describes for task, seeded with config's seed: its model and mixer specs are resolved into
// config (the task's default model when it names none), and model_spec and mixers get them.
SequenceModel build_configured_model(Config& config, const Task& task, std::string& model_spec,
                                     std::vector<MixerSpec>& mixers) {
  const ModelSpec model(config.text("model").empty() ? task.default_model() : config.text("model"));
  config.set("model", model.text, "config");
  model_spec = model.text;
  mixers.clear();
  if (model_takes_mixers(model)) {
    for (const auto& m : config.list("mixer")) mixers.push_back(parse_mixer_spec(m));
    config.set("mixer", join_list(resolved_texts(mixers)), "config");
  } else {
    // The default mixer is dropped; one the user names would do nothing, so it is an error.
    const std::vector<std::string> given = config.list("mixer");
    if (config.was_set("mixer") && given != std::vector<std::string>{"none"})
      throw Error("model " + model.name() + " takes no sequence mixer; leave out --mixer (got " +
                  join(given) + ")");
    config.set("mixer", "none", "config");
  }
  torch::manual_seed(static_cast<uint64_t>(config.integer("seed")));
  return build_model(model, model_context_for(task, mixers));
}

// spec with option key set to value (added when absent).
std::string with_option(const std::string& spec_text, const std::string& key, const std::string& value) {
  Spec spec = Spec::parse(spec_text);
  bool found = false;
  for (auto& [k, v] : spec.options)
    if (k == key) v = value, found = true;
  if (!found) spec.options.emplace_back(key, value);
  return spec.str();
}

}  // namespace

ModelContext model_context_for(const Task& task, std::vector<MixerSpec> mixers) {
  ModelContext c;
  c.vocab_size = task.vocab_size();
  c.input_features = task.input_features();
  c.output_features = task.output_features();
  c.seq_len = task.seq_len();
  c.output_len = task.output_len();
  c.mixers = std::move(mixers);
  return c;
}

Run build_run(Config& config, const std::string& out_dir, std::unique_ptr<Task> task) {
  set_threads(static_cast<int>(config.integer("threads")));
  Run run;
  run.task = task ? std::move(task) : build_task(config.text("task"));
  config.set("task", run.task->resolved_spec(), "config");
  for (const auto& [key, value] : run.task->training_defaults()) config.set_default(key, value, "task " + run.task->name());
  run.model = build_configured_model(config, *run.task, run.model_spec, run.mixers);

  TrainConfig& t = run.train;
  t = train_config_from(config);
  t.out_dir = out_dir;
  t.description["model"] = run.model_spec;
  const ModelContext context = model_context_for(*run.task, run.mixers);
  t.model_record = nlohmann::json{{"spec", run.model_spec},
                                  {"mixers", resolved_texts(run.mixers)},
                                  {"vocab_size", context.vocab_size},
                                  {"input_features", context.input_features},
                                  {"output_features", context.output_features},
                                  {"seq_len", context.seq_len},
                                  {"output_len", context.output_len}}
                       .dump();
  t.description["mixer"] = config.text("mixer");
  return run;
}

TrainConfig train_config_from(const Config& config) {
  const auto fields = trainer_fields();
  return read_fields(fields, config.options(option_infos(fields)));
}

Config run_directory_config(const std::string& run_dir, const std::string& missing_config_reason) {
  namespace fs = std::filesystem;
  const fs::path config_path = fs::path(run_dir) / "config.yaml";
  if (!fs::exists(config_path)) throw Error("run directory " + run_dir + " has no config.yaml" + missing_config_reason);
  Config config(run_config_schema());
  config.merge_yaml_file(config_path.string());
  // A text run trained its tokenizer and saved it (Task::artifacts); reading it back gives the same pieces
  // without the training pass.
  const fs::path tokenizer = fs::path(run_dir) / "tokenizer.model";
  Spec task = Spec::parse(config.text("task"));
  if (task.name == "text" && fs::exists(tokenizer)) {
    for (auto& [key, value] : task.options)
      if (key == "tokenizer" && value.empty()) value = tokenizer.string();
    config.set("task", task.str(), config_path.string());
  }
  return config;
}

Run load_run(const std::string& run_dir, int threads, int64_t step, int64_t& step_loaded, const std::string& weights,
             const std::vector<std::string>& task_options, const std::string& device) {
  Config config = run_directory_config(run_dir, "");
  config.set("threads", std::to_string(threads), "command line");
  config.set("device", device, "--device");
  for (const std::string& assignment : task_options) {
    const size_t eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("--task-option '" + assignment + "' must be KEY=VALUE (e.g. heldout=test)");
    config.set("task", with_option(config.text("task"), assignment.substr(0, eq), assignment.substr(eq + 1)),
               "--task-option");
  }
  Run run = build_run(config, "");
  if (!weights.empty()) {
    load_model_weights(weights, *run.model);
    step_loaded = -1;
  } else {
    TrainerState state;
    if (!load_checkpoint(run_dir, *run.model, nullptr, state, step))
      throw Error("run directory " + run_dir + " has no checkpoint");
    step_loaded = state.step;
  }
  run.model->to(run.train.device);
  return run;
}

namespace {

// A run folder and step of an init_from value ("RUN" or "RUN@STEP"); step -1 when none is named.
std::pair<std::string, int64_t> split_init_from(const std::string& value) {
  const size_t at = value.rfind('@');
  if (at == std::string::npos || at + 1 == value.size() ||
      value.find_first_not_of("0123456789", at + 1) != std::string::npos || value.size() - at > 19)
    return {value, -1};
  return {value.substr(0, at), std::stoll(value.substr(at + 1))};
}

}  // namespace

std::string resolve_init_from(const std::string& value) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(value, ec)) return fs::absolute(value, ec).lexically_normal().string();  // a weights file
  auto [path, step] = split_init_from(value);
  const std::string absolute = fs::absolute(path, ec).lexically_normal().string();
  if (fs::is_regular_file(path, ec) && step < 0) return absolute;
  if (!fs::is_directory(path, ec))
    throw Error("init_from " + value + ": no such run folder or weights file");
  const std::vector<int64_t> steps = list_checkpoints(path);
  if (steps.empty()) throw Error("init_from " + value + ": run " + path + " has no checkpoint");
  if (step < 0) step = steps.back();
  if (std::find(steps.begin(), steps.end(), step) == steps.end())
    throw Error("init_from " + value + ": run " + path + " has no checkpoint at step " + std::to_string(step) +
                " (it has " + std::to_string(steps.front()) + " to " + std::to_string(steps.back()) + ")");
  return absolute + "@" + std::to_string(step);
}

void load_init_from(const std::string& resolved, torch::nn::Module& model) {
  std::error_code ec;
  // A weights file is recorded as its path, whatever its name ends with; a run as PATH@STEP.
  const auto [path, step] = std::filesystem::is_regular_file(resolved, ec) ? std::make_pair(resolved, int64_t{-1})
                                                                           : split_init_from(resolved);
  try {
    if (step < 0)
      load_model_weights(path, model);
    else
      load_checkpoint_weights(path, model, step);
  } catch (const Error& e) {
    throw Error("init_from " + resolved + ": " + e.what());
  }
}

namespace {

// The parameter count of the model config describes for task (the task's training defaults applied first).
int64_t parameter_count_of(Config config, const Task& task) {
  for (const auto& [key, value] : task.training_defaults()) config.set_default(key, value, "task " + task.name());
  std::string model_spec;
  std::vector<MixerSpec> mixers;
  return build_configured_model(config, task, model_spec, mixers)->parameter_count();
}

}  // namespace

std::string match_parameters(Config& config, const std::string& reference, const std::string& option) {
  namespace fs = std::filesystem;
  const bool model_option = option.rfind("model.", 0) == 0, mixer_option = option.rfind("mixer.", 0) == 0;
  if ((!model_option && !mixer_option) || option.size() <= 6)
    throw Error("--match-option " + option + ": name model.<key> or mixer.<key> (e.g. model.dim, mixer.value_dim)");
  const std::string key = option.substr(6);
  std::unique_ptr<Task> task = build_task(config.text("task"));

  // The reference's parameter count: a config file's run, or this run with the reference's mixer spec(s).
  int64_t target = 0;
  std::error_code ec;
  if (fs::is_regular_file(reference, ec)) {
    Config ref(run_config_schema());
    ref.merge_yaml_file(reference);
    target = ref.text("task") == config.text("task") ? parameter_count_of(ref, *task)
                                                      : parameter_count_of(ref, *build_task(ref.text("task")));
  } else {
    Config ref = config;
    ref.set("mixer", reference, "--match-params");
    target = parameter_count_of(ref, *task);
  }

  // This run with option = value; its parameter count, or nothing when that value builds no model.
  auto with_value = [&](int64_t value) {
    Config c = config;
    const std::string text = std::to_string(value);
    if (model_option) {
      const std::string model = c.text("model").empty() ? task->default_model() : c.text("model");
      c.set("model", with_option(model, key, text), "--match-params");
    } else {
      std::vector<std::string> mixers;
      for (const auto& m : c.list("mixer")) mixers.push_back(with_option(m, key, text));
      c.set("mixer", join_list(mixers), "--match-params");
    }
    return c;
  };
  std::string first_failure;
  auto count = [&](int64_t value) -> std::optional<int64_t> {
    try {
      return parameter_count_of(with_value(value), *task);
    } catch (const Error& e) {
      if (first_failure.empty()) first_failure = e.what();
      return std::nullopt;
    } catch (const c10::Error& e) {  // e.g. a width whose weights do not fit in memory
      if (first_failure.empty()) first_failure = first_line(e.what_without_backtrace());
      return std::nullopt;
    }
  };
  // The first value >= from that builds a model, within a window (widths must often divide by a head count).
  constexpr int64_t kWindow = 64, kLargest = 1 << 16;
  auto buildable_from = [&](int64_t from) -> std::optional<std::pair<int64_t, int64_t>> {
    for (int64_t v = from; v < from + kWindow && v <= kLargest; ++v)
      if (auto n = count(v)) return std::make_pair(v, *n);
    return std::nullopt;
  };
  // Parameters grow with a width-like option: double until the count reaches the reference, then bisect.
  std::optional<std::pair<int64_t, int64_t>> below, above;
  for (int64_t v = 1; v <= kLargest && !above; v *= 2) {
    auto b = buildable_from(v);
    if (!b || (below && b->first == below->first)) continue;  // none, or the value the last start found
    if (below && b->second <= below->second)
      throw Error("--match-option " + option + ": the parameter count does not grow with it (" + std::to_string(below->first) +
                  " and " + std::to_string(b->first) + " both give " + with_commas(b->second) + "); choose a width-like option");
    (b->second >= target ? above : below) = b;
  }
  if (!above && !below)
    throw Error("--match-option " + option + ": no value from 1 to " + std::to_string(kLargest) +
                " builds a model (" + first_failure + ")");
  while (below && above && above->first - below->first > 1) {
    auto mid = buildable_from(below->first + (above->first - below->first) / 2);
    if (!mid || mid->first >= above->first) break;
    (mid->second >= target ? above : below) = mid;
  }
  const auto best = !below ? *above : !above ? *below
                    : (above->second - target <= target - below->second ? *above : *below);
  const double relative = static_cast<double>(best.second - target) / static_cast<double>(target);
  char percent[32];
  std::snprintf(percent, sizeof percent, "%+.2f%%", 100.0 * relative);
  const std::string chose = option + "=" + std::to_string(best.first) + " gives " + with_commas(best.second) +
                            " parameters, the reference " + reference + " " + with_commas(target) + " (" + percent + ")";
  if (std::abs(relative) > 0.005)
    throw Error("--match-params: cannot match within 0.5%: " + chose + "; choose another --match-option");
  config = with_value(best.first);
  return chose;
}

}  // namespace seqmix
