// seqmix train: trains a model on a task as its configuration describes; --resume continues a run.
#include <torch/torch.h>

#include <ctime>
#include <filesystem>

#include "commands.h"
#include "seqmix/io/atomic_file.h"
#include "seqmix/io/config.h"
#include "seqmix/io/error.h"
#include "seqmix/train/checkpoint.h"
#include "seqmix/train/run.h"

namespace seqmix::cli {
namespace fs = std::filesystem;
namespace {

struct TrainArgs {
  std::string config_file, out, resume;
  std::vector<std::string> overrides, mixers;
  std::map<std::string, std::string> flag_values;  // config key -> value, for the flags given
};

std::string default_run_dir(const std::string& task_spec) {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return "runs/" + task_spec.substr(0, task_spec.find(':')) + "-" + stamp;
}

void print_header(const Run& run, const std::string& dir) {
  std::printf("task     %s\n", run.task->resolved_spec().c_str());
  for (const auto& m : run.mixers) std::printf("mixer    %s\n", m.c_str());
  std::printf("model    %s: %lld parameters\n", run.model_spec.c_str(), static_cast<long long>(run.model->parameter_count()));
  std::printf("run      %s\n", dir.c_str());
}

int report(const Run& run, const TrainSummary& s) {
  const std::string metric = run.task->primary_metric();
  auto value = [&](const Metrics& m) { return m.count(metric) ? m.at(metric) : NAN; };
  std::printf("final %s %.4f (best %.4f at step %lld) after %lld steps in %.1f s\n", metric.c_str(),
              value(s.final_metrics), value(s.best_metrics), static_cast<long long>(s.best_step),
              static_cast<long long>(s.steps_done), s.wall_seconds);
  if (s.skipped_nonfinite > 0)
    std::printf("skipped %lld steps whose loss or gradient was not finite\n", static_cast<long long>(s.skipped_nonfinite));
  return 0;
}

int run_train(const TrainArgs& a) {
  Config config(run_config_schema());
  if (!a.resume.empty()) {
    const bool only_threads = a.flag_values.empty() || (a.flag_values.size() == 1 && a.flag_values.count("threads"));
    if (!a.config_file.empty() || !a.overrides.empty() || !a.mixers.empty() || !a.out.empty() || !only_threads)
      throw Error("--resume continues a run as it was configured (its config.yaml); only --threads may be given");
    const fs::path cfg = fs::path(a.resume) / "config.yaml";
    if (!fs::exists(cfg)) throw Error("run directory " + a.resume + " has no config.yaml to resume from");
    config.merge_yaml_file(cfg.string());
    if (a.flag_values.count("threads")) config.set("threads", a.flag_values.at("threads"), "command line");
    Run run = build_run(config, a.resume);
    run.train.resume = true;
    print_header(run, a.resume);
    return report(run, train(*run.model, *run.task, run.train));
  }
  if (!a.config_file.empty()) config.merge_yaml_file(a.config_file);
  for (const auto& [key, value] : a.flag_values) config.set(key, value, "command line");
  if (!a.mixers.empty()) config.set("mixer", join_list(a.mixers), "command line");
  for (const auto& o : a.overrides) config.apply_override(o);
  const std::string dir = a.out.empty() ? default_run_dir(config.text("task")) : a.out;
  if (fs::exists(fs::path(dir) / "config.yaml") || !list_checkpoints(dir).empty())
    throw Error("run directory " + dir + " already holds a run; continue it with --resume " + dir +
                " or choose another --out");
  Run run = build_run(config, dir);
  fs::create_directories(dir);
  write_file_atomically((fs::path(dir) / "config.yaml").string(), config.to_yaml());
  for (const auto& [file, content] : run.task->artifacts()) write_file_atomically((fs::path(dir) / file).string(), content);
  print_header(run, dir);
  return report(run, train(*run.model, *run.task, run.train));
}

}  // namespace

void add_train_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<TrainArgs>();
  auto* sub = app.add_subcommand("train", "train a model on a task (default: a short associative-recall run)");
  sub->add_option("--config", a->config_file, "YAML config (see docs/cli.md); flags and --set override it");
  sub->add_option("--set", a->overrides, "override a config key, e.g. --set train.lr=1e-3 (repeatable)");
  sub->add_option("--mixer", a->mixers, "sequence-mixer spec; repeat the flag for one spec per layer, cycled");
  sub->add_option("--out", a->out, "run directory (default runs/<task>-<time>)");
  sub->add_option("--resume", a->resume, "continue the run in this directory from its latest checkpoint");
  const std::vector<std::tuple<std::string, std::string, std::string>> flags = {
      {"--task", "task", "task spec (see seqmix list)"},
      {"--model", "model", "model spec (default: the task's model)"},
      {"--steps", "train.steps", "optimizer steps"},
      {"--batch-size", "train.batch_size", "examples per step"},
      {"--lr", "train.lr", "peak learning rate"},
      {"--weight-decay", "train.weight_decay", "AdamW weight decay on matrices"},
      {"--warmup", "train.warmup", "linear warmup steps"},
      {"--eval-every", "train.eval_every", "evaluate every N steps (0 = at the end only)"},
      {"--target", "train.target", "stop once the task's metric reaches this value"},
      {"--seed", "seed", "seed of the model initialisation"},
      {"--threads", "threads", "intra-op threads (0 = all hardware threads)"},
  };
  for (const auto& [flag, key, help] : flags)
    sub->add_option_function<std::string>(
        flag, [a, key = key](const std::string& v) { a->flag_values[key] = v; }, help + " [config key " + key + "]");
  sub->add_flag_callback(
      "--skip-nonfinite", [a] { a->flag_values["train.skip_nonfinite"] = "true"; },
      "skip and count steps whose loss or gradient is NaN or Inf instead of stopping [config key train.skip_nonfinite]");
  sub->callback([&action, a] { action = [a] { return run_train(*a); }; });
}

}  // namespace seqmix::cli
