// seqmix train: trains a model on a task as its configuration describes; --resume continues a run.
#include <torch/torch.h>

#include <csignal>
#include <cstdio>
#include <cmath>
#include <ctime>
#include <map>
#include <set>
#include <filesystem>
#include <optional>
#include <thread>

#include "commands.h"
#include "seqmix/dist/communicator.h"
#include "seqmix/dist/launcher.h"
#include <nlohmann/json.hpp>
#include "seqmix/io/atomic_file.h"
#include "seqmix/io/config.h"
#include "seqmix/io/error.h"
#include "seqmix/io/interrupt.h"
#include "seqmix/io/run_lock.h"
#include "seqmix/io/runtime.h"
#include "seqmix/tasks/task.h"
#include "seqmix/train/checkpoint.h"
#include "seqmix/train/run.h"
#include "seqmix/train/seeds.h"

namespace seqmix::cli {
namespace fs = std::filesystem;
namespace {

struct TrainArgs {
  std::string config_file, out, resume;
  std::vector<std::string> overrides, mixers;
  std::map<std::string, std::string> flag_values;  // config key -> value, for the flags given
  int nproc = 0;                                   // > 0: launch this many local workers
  std::string dist_init;                           // env:// or file://PATH: join a job as one worker
  std::optional<int> rank, world_size;             // for file://
  int dist_timeout = 300;                          // seconds
  std::optional<std::string> dist_backend;         // gloo (default) or nccl
  std::string match_params, match_option = "model.dim";  // --match-params REF: solve match_option to REF's size
  std::string match_report;                         // what --match-params chose, printed with the header
  std::vector<int64_t> seeds;                       // --seeds: one run per seed, tabulated
};

std::string default_run_dir(const std::string& task_spec) {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return "runs/" + task_spec.substr(0, task_spec.find(':')) + "-" + stamp;
}

void print_header(const Run& run, const std::string& dir) {
  std::printf("task     %s\n", run.task->resolved_spec().c_str());
  for (const auto& m : run.mixers) std::printf("mixer    %s\n", m.text.c_str());
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

// The configuration of the run to train: a new one from the arguments, or a run directory's config.yaml
// (--resume). `dir` gets the run directory.
Config run_configuration(TrainArgs& a, std::string& dir) {
  if (!a.resume.empty()) {
    if (!a.match_params.empty()) throw Error("--match-params sizes a new run; a resumed run keeps its config.yaml");
    bool only_threads_and_steps = true;
    for (const auto& [key, value] : a.flag_values)
      only_threads_and_steps &= key == "threads" || key == "train.steps" || key == "device";
    if (!a.config_file.empty() || !a.overrides.empty() || !a.mixers.empty() || !a.out.empty() || !only_threads_and_steps)
      throw Error("--resume continues a run as it was configured (its config.yaml); only --threads, --device and "
                  "--steps (to extend it) may be given");
    // A text run's saved tokenizer.model is read back, not trained again.
    Config config = run_directory_config(a.resume, " to resume from");
    if (a.flag_values.count("threads")) config.set("threads", a.flag_values.at("threads"), "command line");
    if (a.flag_values.count("device")) config.set("device", a.flag_values.at("device"), "command line");
    if (a.flag_values.count("train.steps")) config.set("train.steps", a.flag_values.at("train.steps"), "--steps");
    dir = a.resume;
    return config;
  }
  Config config(run_config_schema());
  if (!a.config_file.empty()) config.merge_yaml_file(a.config_file);
  for (const auto& [key, value] : a.flag_values) config.set(key, value, "command line");
  if (!a.mixers.empty()) config.set("mixer", join_list(a.mixers), "command line");
  for (const auto& o : a.overrides) config.apply_override(o);
  // The chosen value lands in config.yaml; the reference is only printed.
  if (!a.match_params.empty()) a.match_report = match_parameters(config, a.match_params, a.match_option);
  // Recorded as an absolute path and step, so a resume loads the same weights from any directory.
  if (!config.text("init_from").empty())
    config.set("init_from", resolve_init_from(config.text("init_from")), "the run folder");
  dir = a.out.empty() ? default_run_dir(config.text("task")) : a.out;
  return config;
}

// What a new run checks beyond its specs before its folder is written: that a step fits in memory, and the weights
// it starts from (which its model takes).
void prepare_new_run(const Run& run) {
  check_batch_fits_in_memory(*run.task, run.train.batch_size);
  if (!run.train.init_from.empty()) load_init_from(run.train.init_from, *run.model);
}

void refuse_existing_run(const std::string& dir) {
  if (fs::exists(fs::path(dir) / "config.yaml") || !list_checkpoints(dir).empty())
    throw Error("run directory " + dir + " already holds a run; continue it with --resume " + dir +
                " or choose another --out");
}

// The task spec with its data file (the `path` option of text and ett, given or default) made absolute, so the
// run folder works from any working directory (eval, generate, --resume).
std::string with_absolute_data_path(const std::string& task_spec) {
  Spec task = Spec::parse(task_spec);
  const ComponentInfo& info = find_component(task_infos(), "task", task.name);
  for (const OptionInfo& option : info.options) {
    if (option.key != "path") continue;
    bool given = false;
    for (auto& [key, value] : task.options)
      if (key == "path") {
        value = fs::absolute(value).lexically_normal().string();
        given = true;
      }
    if (!given) task.options.emplace_back("path", fs::absolute(option.default_value).lexically_normal().string());
  }
  return task.str();
}

// A new run's directory: its resolved config.yaml and the task's artifacts (the tokenizer of a text run).
void start_run_directory(Config config, const Run& run, const std::string& dir) {
  fs::create_directories(dir);
  config.set("task", with_absolute_data_path(config.text("task")), "the run folder");
  write_file_atomically((fs::path(dir) / "config.yaml").string(), config.to_yaml());
  for (const auto& [file, content] : run.task->artifacts()) write_file_atomically((fs::path(dir) / file).string(), content);
}

// --resume DIR --steps N: the run's config.yaml gets the new total, checked against its latest checkpoint (under
// the run folder's lock). The learning-rate schedule is recomputed for the new total.
void extend_run(const std::string& dir, int64_t steps) {
  const std::vector<int64_t> done = list_checkpoints(dir);
  if (!done.empty() && steps <= done.back())
    throw Error("--steps " + std::to_string(steps) + ": run " + dir + " is already at step " +
                std::to_string(done.back()) + "; give more steps to extend it");
  const std::string path = (fs::path(dir) / "config.yaml").string();
  Config stored(run_config_schema());
  stored.merge_yaml_file(path);
  stored.set("train.steps", std::to_string(steps), "--steps");
  write_file_atomically(path, stored.to_yaml());
}

// --nproc N: checks the run and writes its directory once, then starts N workers that continue it
// (`train --resume DIR`: a run with no checkpoint starts at step 0) as one data-parallel job.
int launch_workers(TrainArgs& a) {
  if (!a.dist_init.empty() || dist::launched_distributed())
    throw Error("--nproc starts its own workers; leave out --dist-init, and do not combine it with torchrun");
  if (a.rank || a.world_size) throw Error("--rank and --world-size belong to --dist-init file://PATH, not --nproc");
  std::string dir;
  {
    Config config = run_configuration(a, dir);
    const bool resume = !a.resume.empty();
    if (!resume) fs::create_directories(dir);
    const RunFolderLock lock(dir);  // while the launcher writes the folder; rank 0 takes it over
    if (!resume) refuse_existing_run(dir);
    Run run = build_run(config, dir);  // every spec is checked here, once, before a worker starts
    if (!resume) prepare_new_run(run);  // the workers load them again (a resume with no checkpoint)
    if (run.train.batch_size % a.nproc != 0)
      throw Error("train: the batch size " + std::to_string(run.train.batch_size) + " does not split evenly over " +
                  std::to_string(a.nproc) + " processes; choose a multiple of " + std::to_string(a.nproc));
    if (!resume) start_run_directory(config, run, dir);
    if (resume && a.flag_values.count("train.steps")) extend_run(dir, config.integer("train.steps"));
  }
  std::vector<std::string> arguments = {"train", "--resume", dir, "--dist-timeout", std::to_string(a.dist_timeout)};
  if (a.flag_values.count("train.steps")) arguments.insert(arguments.end(), {"--steps", a.flag_values.at("train.steps")});
  if (a.dist_backend) arguments.insert(arguments.end(), {"--dist-backend", *a.dist_backend});
  if (a.flag_values.count("threads")) arguments.insert(arguments.end(), {"--threads", a.flag_values.at("threads")});
  return dist::run_local_workers("train", arguments, a.nproc);
}

// The process group of a worker: torchrun's variables, --dist-init, or none (one process).
std::shared_ptr<dist::Communicator> join_job(const TrainArgs& a) {
  if (a.dist_init.empty() && !dist::launched_distributed()) {
    if (a.rank || a.world_size) throw Error("--rank and --world-size belong to --dist-init file://PATH");
    if (a.dist_backend) throw Error("--dist-backend belongs to a data-parallel job (--nproc, torchrun or --dist-init)");
    return nullptr;
  }
  if ((a.rank || a.world_size) && a.dist_init.rfind("file://", 0) != 0)
    throw Error("--rank and --world-size belong to --dist-init file://PATH (under torchrun they come from it)");
  dist::InitOptions options;
  options.init_method = a.dist_init.empty() ? "env://" : a.dist_init;
  options.rank = a.rank;
  options.world_size = a.world_size;
  options.timeout = std::chrono::seconds(a.dist_timeout);
  if (a.dist_backend) options.backend = *a.dist_backend;
  return dist::Communicator::join(options);
}

// Workers on one machine share its cores, unless the run names its thread count.
void share_cores(const Config& config, const dist::Communicator& communicator) {
  if (config.integer("threads") != 0 || communicator.local_world_size() <= 1) return;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  set_threads(std::max(1, cores / communicator.local_world_size()));
}

// --seeds S1,S2,...: one run per seed in OUT/seed-S (a finished one is read back, an unfinished one resumed), then
// the final metrics of each and their mean and sample standard deviation, printed and written to OUT/seeds.json.
int run_seeds(TrainArgs& a) {
  if (!a.resume.empty() || a.nproc > 0 || !a.dist_init.empty() || a.flag_values.count("seed"))
    throw Error("--seeds runs one training per seed into OUT/seed-S; leave out --resume, --nproc, --dist-init and "
                "--seed (rerun the same command to continue unfinished seeds)");
  if (a.out.empty()) throw Error("--seeds needs --out DIR: the seeds' runs go to DIR/seed-S, and rerunning continues them");
  std::set<int64_t> distinct(a.seeds.begin(), a.seeds.end());
  if (distinct.size() != a.seeds.size()) throw Error("--seeds lists a seed twice");
  std::string base;
  const Config config = run_configuration(a, base);
  // The configuration the seeds share (threads aside), kept in DIR/seeds.yaml: a rerun must ask for the same one, or
  // its seeds would be tabulated with runs of another configuration.
  Config shared = config;
  shared.set("threads", "0", "--seeds");
  const fs::path shared_path = fs::path(base) / "seeds.yaml";
  if (fs::exists(shared_path) && read_file(shared_path.string()) != shared.to_yaml())
    throw Error("--out " + base + " holds the seeds of another configuration (" + shared_path.string() +
                "); give the same flags as before, or another --out");
  std::string metric;
  std::map<std::string, std::vector<double>> values;  // metric -> one value per seed
  nlohmann::json runs = nlohmann::json::object();
  for (const int64_t seed : a.seeds) {
    const std::string dir = (fs::path(base) / ("seed-" + std::to_string(seed))).string();
    const fs::path summary_path = fs::path(dir) / "summary.json";
    if (!fs::exists(summary_path)) {
      const bool resume = fs::exists(fs::path(dir) / "config.yaml");
      Config c = resume ? run_directory_config(dir, "") : config;
      if (!resume) c.set("seed", std::to_string(seed), "--seeds");
      if (resume && a.flag_values.count("threads")) c.set("threads", a.flag_values.at("threads"), "command line");
      Run run = build_run(c, dir);
      if (!resume) {
        prepare_new_run(run);  // everything checked before DIR or DIR/seed-S is created
        fs::create_directories(dir);
        if (!fs::exists(shared_path)) write_file_atomically(shared_path.string(), shared.to_yaml());
      }
      const RunFolderLock lock(dir);
      if (!resume) start_run_directory(c, run, dir);
      run.train.resume = resume;
      install_stop_signals();
      print_header(run, dir);
      if (!a.match_report.empty()) std::printf("matched  %s\n", a.match_report.c_str());
      if (!run.train.init_from.empty()) std::printf("init     %s\n", run.train.init_from.c_str());
      const TrainSummary summary = train(*run.model, *run.task, run.train);
      if (summary.stopped_by_signal != 0) {
        std::fprintf(stderr, "train: stopped by %s after step %lld of seed %lld; rerun the same command to continue\n",
                     summary.stopped_by_signal == SIGINT ? "SIGINT" : "SIGTERM",
                     static_cast<long long>(summary.steps_done), static_cast<long long>(seed));
        return 128 + summary.stopped_by_signal;
      }
      report(run, summary);
    } else {
      std::printf("seed %lld: finished earlier (%s)\n", static_cast<long long>(seed), dir.c_str());
    }
    nlohmann::json s;
    try {
      s = nlohmann::json::parse(read_file(summary_path.string()));
      for (auto it = s.at("final").begin(); it != s.at("final").end(); ++it) values[it.key()].push_back(it->get<double>());
    } catch (const nlohmann::json::exception& e) {
      throw Error("run " + dir + ": summary.json is not a run summary (" + std::string(e.what()) + ")");
    }
    runs[std::to_string(seed)] = s.at("final");
  }
  nlohmann::json table = {{"seeds", a.seeds}, {"runs", runs}, {"mean", nlohmann::json::object()},
                          {"std", nlohmann::json::object()}};
  std::printf("\n%-16s %s over seeds %s (mean ± sample std)\n", "metric", "value", join_seeds(a.seeds).c_str());
  for (const auto& [name, v] : values) {
    if (v.size() != a.seeds.size()) continue;  // a metric not every run reported
    const MeanStd m = mean_and_sample_std(v);
    table["mean"][name] = m.mean;
    table["std"][name] = m.std;
    std::printf("%-16s %.4f ± %.4f\n", name.c_str(), m.mean, m.std);
  }
  write_file_atomically((fs::path(base) / "seeds.json").string(), table.dump(2) + "\n");
  std::printf("wrote %s\n", (fs::path(base) / "seeds.json").string().c_str());
  return 0;
}

int run_train(TrainArgs& a) {
  if (a.dist_timeout < 1) throw Error("--dist-timeout must be at least 1 second");
  if (!a.seeds.empty()) return run_seeds(a);
  if (a.nproc > 0) return launch_workers(a);
  const auto communicator = join_job(a);
  const bool rank0 = !communicator || communicator->rank() == 0;
  if (communicator && a.resume.empty() && a.out.empty())
    throw Error("a distributed run needs --out DIR (or --resume DIR), the same directory on every rank");
  std::string dir;
  Config config = run_configuration(a, dir);
  const bool resume = !a.resume.empty();
  // torchrun restarting a failed job runs the same command again: the run continues from its checkpoint.
  const bool restarted = communicator && dist::restarted_by_torchrun();
  Run run = build_run(config, dir);  // every spec and option checked before the folder is touched
  if (!resume && !restarted) prepare_new_run(run);
  // One writer per run folder, from before anything in it is written or truncated to the process's end.
  std::optional<RunFolderLock> lock;
  if (rank0) {
    if (!resume) fs::create_directories(dir);
    lock.emplace(dir);
  }
  if (resume && a.flag_values.count("train.steps") && rank0) extend_run(dir, config.integer("train.steps"));
  // Ctrl-C / kill stop a one-process run after its step with a checkpoint (data-parallel workers are stopped
  // by their launcher, docs/distributed.md).
  if (!communicator) install_stop_signals();
  // Rank 0 alone checks and writes the directory: the others would see its config.yaml.
  if (!resume && !restarted && rank0) refuse_existing_run(dir);
  run.train.resume = resume || restarted;
  run.train.extend = resume && a.flag_values.count("train.steps") > 0;
  run.train.communicator = communicator;
  if (communicator) share_cores(config, *communicator);
  if (!resume && !restarted && rank0) start_run_directory(config, run, dir);
  if (rank0) print_header(run, dir);
  if (rank0 && !a.match_report.empty()) std::printf("matched  %s\n", a.match_report.c_str());
  if (rank0 && !run.train.init_from.empty()) std::printf("init     %s\n", run.train.init_from.c_str());
  const TrainSummary summary = train(*run.model, *run.task, run.train);
  if (summary.stopped_by_signal != 0) {
    std::fprintf(stderr, "train: stopped by %s after step %lld%s\n",
                 summary.stopped_by_signal == SIGINT ? "SIGINT" : "SIGTERM",
                 static_cast<long long>(summary.steps_done),
                 dir.empty() ? "" : ("; its checkpoint is written: continue with seqmix train --resume " + dir).c_str());
    return 128 + summary.stopped_by_signal;
  }
  return rank0 ? report(run, summary) : 0;
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
      {"--init-from", "init_from",
       "start a new run from the weights of a run's latest checkpoint (RUN, or RUN@STEP) or of a safetensors "
       "weights file; not its optimizer state, step or random numbers"},
      {"--threads", "threads", "intra-op threads (0 = all hardware threads)"},
      {"--device", "device", "cpu (default), cuda or cuda:N: where the model, optimizer state and batches live"},
      {"--dtype", "train.dtype",
       "fp32, or bf16: forward passes under bfloat16 autocast; weights, optimizer state and checkpoints stay fp32"},
  };
  for (const auto& [flag, key, help] : flags)
    sub->add_option_function<std::string>(
        flag, [a, key = key](const std::string& v) { a->flag_values[key] = v; }, help + " [config key " + key + "]");
  sub->add_option("--nproc", a->nproc, "run as N data-parallel worker processes on this machine (docs/distributed.md)")
      ->check(CLI::Range(1, 256));
  sub->add_option("--dist-init", a->dist_init,
                  "join a data-parallel job: env:// (torchrun's variables, the default under torchrun) or file://PATH");
  sub->add_option("--rank", a->rank, "this worker's rank, with --dist-init file://PATH (default: $RANK)")->check(CLI::NonNegativeNumber);
  sub->add_option("--world-size", a->world_size, "the number of workers, with --dist-init file://PATH (default: $WORLD_SIZE)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--dist-backend", a->dist_backend,
                  "collectives of a data-parallel job: gloo (default, CPU) or nccl (one GPU per worker; built where "
                  "torch ships NCCL, never run here: docs/distributed.md)");
  sub->add_option("--dist-timeout", a->dist_timeout,
                  "seconds a worker waits for the others (joining, every collective) before it gives up (default 300)");
  sub->add_option("--seeds", a->seeds,
                  "train once per seed (e.g. 0,1,2) into OUT/seed-S (needs --out) and tabulate the final metrics (mean ± "
                  "sample std) in OUT/seeds.json; rerunning the same command continues unfinished seeds")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--match-params", a->match_params,
                  "size this run to a reference's parameter count within 0.5%: REF is a config file or mixer spec(s) "
                  "replacing --mixer; solves --match-option and prints the value chosen");
  sub->add_option("--match-option", a->match_option,
                  "the integer option --match-params solves: model.<key> (default model.dim) or mixer.<key>");
  sub->add_flag_callback(
      "--skip-nonfinite", [a] { a->flag_values["train.skip_nonfinite"] = "true"; },
      "skip and count steps whose loss or gradient is NaN or Inf instead of stopping [config key train.skip_nonfinite]");
  sub->callback([&action, a] { action = [a] { return run_train(*a); }; });
}

}  // namespace seqmix::cli
