// seqmix train: trains a model with the given mixer on a task and reports its metrics.
#include <torch/torch.h>

#include <chrono>
#include <ctime>
#include <filesystem>

#include "commands.h"
#include "seqmix/io/error.h"
#include "seqmix/io/runtime.h"
#include "seqmix/models/language_model.h"
#include "seqmix/tasks/task.h"
#include "seqmix/train/trainer.h"

namespace seqmix::cli {
namespace {

struct TrainArgs {
  std::string task = "mad.in_context_recall:seq_len=64,num_train=6400";
  std::vector<std::string> mixers;
  std::string model = "lm";
  int64_t steps = 600;
  int64_t batch_size = 64;
  double lr = 1e-3;
  double weight_decay = 0.1;
  int64_t warmup = 50;
  int64_t eval_every = 100;
  double target = 0.0;
  uint64_t seed = 0;
  std::string out;
  int threads = 0;
};

std::string default_run_dir(const std::string& task_name) {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return "runs/" + task_name + "-" + stamp;
}

int run_train(const TrainArgs& a) {
  set_threads(a.threads);
  torch::manual_seed(a.seed);
  auto task = build_task(a.task);

  LanguageModelOptions mo;
  mo.vocab_size = task->vocab_size();
  mo.input_features = task->input_features();
  mo.output_features = task->output_features();
  mo.max_len = task->seq_len();
  apply_model_spec(a.model, mo);
  mo.mixers = a.mixers.empty() ? std::vector<std::string>{"softmax"} : a.mixers;
  for (auto& m : mo.mixers) m = resolve_mixer_spec(m);
  LanguageModel model(mo);

  TrainConfig tc;
  tc.steps = a.steps;
  tc.batch_size = a.batch_size;
  tc.optimizer.lr = a.lr;
  tc.optimizer.weight_decay = a.weight_decay;
  tc.warmup_steps = std::min(a.warmup, a.steps / 2);
  tc.eval_every = a.eval_every;
  tc.target = a.target;
  tc.seed = a.seed;
  tc.out_dir = a.out.empty() ? default_run_dir(task->name()) : a.out;

  std::printf("task     %s\n", task->resolved_spec().c_str());
  for (const auto& m : mo.mixers) std::printf("mixer    %s\n", m.c_str());
  std::printf("model    %lld parameters, %lld layers, width %lld\n",
              static_cast<long long>(model->parameter_count()), static_cast<long long>(mo.layers),
              static_cast<long long>(mo.dim));
  std::printf("run      %s\n", tc.out_dir.c_str());
  const TrainSummary s = train(*model, *task, tc);
  const std::string metric = task->primary_metric();
  auto value = [&](const Metrics& m) { return m.count(metric) ? m.at(metric) : NAN; };
  std::printf("final %s %.4f (best %.4f at step %lld) after %lld steps in %.1f s\n", metric.c_str(),
              value(s.final_metrics), value(s.best_metrics), static_cast<long long>(s.best_step),
              static_cast<long long>(s.steps_done), s.wall_seconds);
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<TrainArgs>();
  auto* sub = app.add_subcommand("train", "train a model on a task (default: a short associative-recall run)");
  sub->add_option("--task", a->task, "task spec (see seqmix list)")->capture_default_str();
  sub->add_option("--mixer", a->mixers,
                  "sequence-mixer spec; repeat the flag for one spec per layer, cycled (default softmax)");
  sub->add_option("--model", a->model, "model spec, e.g. lm:dim=128,layers=2")->capture_default_str();
  sub->add_option("--steps", a->steps, "optimizer steps")->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--batch-size", a->batch_size, "examples per step")->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--lr", a->lr, "peak learning rate")->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--weight-decay", a->weight_decay, "AdamW weight decay on matrices")->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--warmup", a->warmup, "linear warmup steps")->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--eval-every", a->eval_every, "evaluate every N steps (0 = at the end only)")->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--target", a->target, "stop once the task's metric reaches this value (0 = off)")->capture_default_str();
  sub->add_option("--seed", a->seed, "seed of the model initialisation")->capture_default_str();
  sub->add_option("--out", a->out, "run directory (default runs/<task>-<time>)");
  sub->add_option("--threads", a->threads, "intra-op threads (0 = all hardware threads)")->capture_default_str();
  sub->callback([&action, a] { action = [a] { return run_train(*a); }; });
}

}  // namespace seqmix::cli
