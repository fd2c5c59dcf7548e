#include "seqmix/train/trainer.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "seqmix/io/error.h"
#include "seqmix/train/progress.h"
#include "seqmix/train/schedule.h"

namespace seqmix {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool better(double a, double b, bool higher) { return higher ? a > b : a < b; }

nlohmann::json to_json(const Metrics& m) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

}  // namespace

Metrics evaluate(SequenceModelImpl& model, Task& task) {
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const Batch& test = task.test_set();
  const int64_t bs = task.eval_batch_size();
  MetricSums sums;
  for (int64_t b = 0; b < test.size(); b += bs) {
    Batch batch = test.rows(b, std::min(test.size(), b + bs));
    auto out = model.forward(batch.inputs);
    const double n = static_cast<double>(batch.size());
    sums.add("loss", task.loss(out, batch).item<double>() * n, n);
    task.add_metrics(out, batch, sums);
  }
  model.train(was_training);
  return sums.values();
}

TrainSummary train(SequenceModelImpl& model, Task& task, const TrainConfig& config) {
  if (config.steps < 1) throw Error("train: steps must be >= 1");
  if (config.batch_size < 1) throw Error("train: batch size must be >= 1");
  const auto wall_start = Clock::now();
  TrainSummary summary;
  summary.parameters = model.parameter_count();

  std::ofstream metrics_log;
  if (!config.out_dir.empty()) {
    std::filesystem::create_directories(config.out_dir);
    metrics_log.open(std::filesystem::path(config.out_dir) / "metrics.jsonl", std::ios::app);
    if (!metrics_log) throw Error("cannot write " + config.out_dir + "/metrics.jsonl");
  }
  auto log = [&](const nlohmann::json& j) {
    if (metrics_log.is_open()) metrics_log << j.dump() << "\n" << std::flush;
  };

  auto optimizer = make_adamw(model, config.optimizer);
  const Schedule schedule{config.optimizer.lr, config.min_lr, config.warmup_steps, config.steps};
  Progress progress(config.steps);
  const std::string metric = task.primary_metric();
  const bool higher = task.higher_is_better();
  bool have_best = false;

  auto run_eval = [&](int64_t step) {
    Metrics m = evaluate(model, task);
    summary.final_metrics = m;
    if (m.count(metric) && (!have_best || better(m[metric], summary.best_metrics[metric], higher))) {
      summary.best_metrics = m;
      summary.best_step = step;
      have_best = true;
    }
    nlohmann::json j = to_json(m);
    j["step"] = step;
    j["split"] = "test";
    log(j);
    if (!config.quiet) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "eval step %lld: loss %.4f  %s %.4f", static_cast<long long>(step),
                    m.count("loss") ? m["loss"] : NAN, metric.c_str(), m.count(metric) ? m[metric] : NAN);
      progress.line(buf);
    }
    return m;
  };

  model.train();
  auto interval_start = Clock::now();
  int64_t interval_tokens = 0;
  double interval_loss = 0;
  int64_t interval_steps = 0;
  for (int64_t step = 0; step < config.steps; ++step) {
    const double lr = schedule.lr_at(step);
    set_learning_rate(*optimizer, lr);
    Batch batch = task.train_batch(step, config.batch_size);
    optimizer->zero_grad();
    auto out = model.forward(batch.inputs);
    auto loss = task.loss(out, batch);
    loss.backward();
    double grad_norm = 0;
    {
      double sq = 0;
      for (const auto& p : model.parameters())
        if (p.grad().defined()) sq += p.grad().to(torch::kDouble).square().sum().item<double>();
      grad_norm = std::sqrt(sq);
      if (config.grad_clip > 0 && grad_norm > config.grad_clip) {
        torch::NoGradGuard no_grad;
        const double scale = config.grad_clip / (grad_norm + 1e-6);
        for (auto& p : model.parameters())
          if (p.grad().defined()) p.grad().mul_(scale);
      }
    }
    optimizer->step();
    const double loss_value = loss.item<double>();
    interval_loss += loss_value;
    interval_steps += 1;
    interval_tokens += batch.size() * task.seq_len();
    summary.steps_done = step + 1;

    const bool last = step + 1 == config.steps;
    if ((step + 1) % std::max<int64_t>(1, config.log_every) == 0 || last) {
      const double tps = static_cast<double>(interval_tokens) / std::max(1e-9, seconds_since(interval_start));
      MetricSums train_sums;
      {
        torch::NoGradGuard no_grad;
        task.add_metrics(out.detach(), batch, train_sums);
      }
      Metrics train_metrics = train_sums.values();
      nlohmann::json j = to_json(train_metrics);
      j["step"] = step + 1;
      j["split"] = "train";
      j["loss"] = interval_loss / static_cast<double>(interval_steps);
      j["lr"] = lr;
      j["grad_norm"] = grad_norm;
      j["tokens_per_s"] = tps;
      log(j);
      if (!config.quiet)
        progress.update(step + 1, interval_loss / static_cast<double>(interval_steps), metric,
                        train_metrics.count(metric) ? train_metrics[metric] : NAN, tps);
      interval_start = Clock::now();
      interval_tokens = 0;
      interval_loss = 0;
      interval_steps = 0;
    }
    if (!std::isfinite(loss_value))
      throw Error("train: the loss became non-finite at step " + std::to_string(step + 1));
    const bool eval_now = last || (config.eval_every > 0 && (step + 1) % config.eval_every == 0);
    if (eval_now) {
      Metrics m = run_eval(step + 1);
      if (config.target > 0 && m.count(metric) &&
          (higher ? m[metric] >= config.target : m[metric] <= config.target) && !last) {
        summary.stopped_early = true;
        if (!config.quiet) progress.line("target " + metric + " reached: stopping early");
        break;
      }
    }
  }
  progress.finish();
  summary.wall_seconds = seconds_since(wall_start);

  if (!config.out_dir.empty()) {
    nlohmann::json s;
    s["task"] = task.resolved_spec();
    s["final"] = to_json(summary.final_metrics);
    s["best"] = to_json(summary.best_metrics);
    s["best_step"] = summary.best_step;
    s["steps"] = summary.steps_done;
    s["stopped_early"] = summary.stopped_early;
    s["parameters"] = summary.parameters;
    s["wall_seconds"] = summary.wall_seconds;
    std::ofstream f(std::filesystem::path(config.out_dir) / "summary.json");
    f << s.dump(2) << "\n";
    if (!f) throw Error("cannot write " + config.out_dir + "/summary.json");
  }
  return summary;
}

}  // namespace seqmix
