#include "seqmix/train/mad.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "seqmix/io/atomic_file.h"
#include "seqmix/io/config.h"
#include "seqmix/io/error.h"
#include "seqmix/io/spec.h"
#include "seqmix/tasks/task.h"
#include "seqmix/io/checksum.h"
#include "seqmix/train/run.h"
#include "seqmix/train/seeds.h"

namespace seqmix {
namespace fs = std::filesystem;
namespace {

// The baseline spec of a task followed by one-at-a-time variations of single fields: each variation is the
// baseline with that one field's value replaced (or added, when the baseline leaves it at its default).
std::vector<std::string> ladder(const std::string& task, const std::string& baseline,
                                const std::vector<std::pair<std::string, std::vector<std::string>>>& variations) {
  const Spec base = Spec::parse(task + ":" + baseline);
  std::vector<std::string> out{base.str()};
  for (const auto& [key, values] : variations)
    for (const auto& v : values) {
      Spec varied = base;
      auto field = std::find_if(varied.options.begin(), varied.options.end(),
                                [&key = key](const auto& option) { return option.first == key; });
      if (field == varied.options.end()) varied.options.emplace_back(key, v);
      else field->second = v;
      out.push_back(varied.str());
    }
  return out;
}

const std::vector<std::string> kTrainSizes = {"6400", "3200", "1600", "800"};

MadPreset paper_preset() {
  MadPreset p;
  p.name = "paper";
  p.sweep = {{1e-4, 0.0}, {1e-4, 0.1}, {5e-4, 0.0}, {5e-4, 0.1}, {1e-3, 0.0}, {1e-3, 0.1}};
  p.batch_size = 128;
  p.tasks = {
      {"mad.in_context_recall",
       ladder("mad.in_context_recall", "vocab_size=16,seq_len=128,num_train=12800",
              {{"vocab_size", {"32", "64", "128"}}, {"seq_len", {"256", "512", "1024"}}, {"num_train", kTrainSizes}}),
       200},
      {"mad.fuzzy_recall",
       ladder("mad.fuzzy_recall", "vocab_size=16,seq_len=128,num_train=12800",
              {{"vocab_size", {"32", "64", "128"}}, {"seq_len", {"256", "512", "1024"}}, {"num_train", kTrainSizes}}),
       200},
      {"mad.noisy_recall",
       ladder("mad.noisy_recall", "vocab_size=32,seq_len=128,num_train=12800,frac_noise=0.2",
              {{"vocab_size", {"48", "80", "144"}},
               {"seq_len", {"256", "512", "1024"}},
               {"num_train", kTrainSizes},
               {"frac_noise", {"0.4", "0.6", "0.8"}}}),
       200},
      {"mad.selective_copy",
       ladder("mad.selective_copy", "vocab_size=16,seq_len=256,num_tokens_to_copy=16,num_train=12800",
              {{"vocab_size", {"32", "64", "128"}},
               {"seq_len", {"512", "1024"}},
               {"num_train", kTrainSizes},
               {"num_tokens_to_copy", {"32", "64", "96"}}}),
       200},
      {"mad.compression",
       ladder("mad.compression", "vocab_size=16,seq_len=32,num_train=12800",
              {{"vocab_size", {"32", "64", "128"}}, {"seq_len", {"64", "128", "256"}}, {"num_train", kTrainSizes}}),
       200},
      {"mad.memorization",
       ladder("mad.memorization", "vocab_size=256,seq_len=32,num_train=256",
              {{"vocab_size", {"512", "1024", "2048", "4096", "8192"}}}),
       200},
  };
  return p;
}

MadPreset cpu_preset() {
  MadPreset p;
  p.name = "cpu";
  p.sweep = {{3e-3, 0.1}};
  p.batch_size = 64;
  p.tasks = {
      {"mad.in_context_recall", {"mad.in_context_recall:seq_len=64,num_train=6400"}, 15},
      {"mad.fuzzy_recall", {"mad.fuzzy_recall:seq_len=64,num_train=6400"}, 15},
      {"mad.noisy_recall", {"mad.noisy_recall:seq_len=64,num_train=6400"}, 15},
      {"mad.selective_copy", {"mad.selective_copy:seq_len=64,num_tokens_to_copy=8,num_train=6400"}, 15},
      {"mad.compression", {"mad.compression:num_train=6400"}, 15},
      {"mad.memorization", {"mad.memorization"}, 200},
  };
  return p;
}

std::string slug(const std::string& spec) {
  std::string s;
  for (char c : spec) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (s.size() > 48) s.resize(48);
  char hash[20];
  std::snprintf(hash, sizeof hash, "-%08llx", static_cast<unsigned long long>(fnv1a64_seqmix(spec) & 0xffffffffULL));
  return s + hash;
}

std::string format_real(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Trains (or reuses) one run and returns the accuracy of its lowest-test-loss evaluation; NaN when the run has
// not finished and finished_only forbids training it.
double mad_run(const MadOptions& o, const MadPreset& preset, const MadTaskPlan& plan, const std::string& setting,
               const MadSweepPoint& point, const std::string& mixer, const fs::path& dir) {
  const fs::path summary_path = dir / "summary.json";
  if (!fs::exists(summary_path) && o.finished_only) return NAN;
  if (!fs::exists(summary_path)) {
    Config config(run_config_schema());
    std::unique_ptr<Task> task;  // a new run's task, built once here and handed to build_run
    // A run stopped before its first checkpoint resumes too: the trainer starts it again from step 0 and
    // drops the log lines and temporary files it left.
    const bool resume = fs::exists(dir / "config.yaml");
    if (resume) {
      config.merge_yaml_file((dir / "config.yaml").string());
    } else {
      task = build_task(setting);  // its training set sizes an epoch; the run trains on it
      const int64_t per_epoch = (task->train_size() + preset.batch_size - 1) / preset.batch_size;
      config.set("task", setting, "mad");
      config.set("mixer", mixer, "mad");
      if (!o.residual.empty()) {  // the task's own backbone (lm, or compression's autoencoder) with that residual
        Spec model = Spec::parse(task->default_model());
        model.options.emplace_back("residual", o.residual);
        config.set("model", model.str(), "mad");
      }
      config.set("seed", std::to_string(o.seed), "mad");
      const int64_t steps = plan.epochs * per_epoch;
      config.set("train.steps", std::to_string(o.max_steps > 0 ? std::min(steps, o.max_steps) : steps), "mad");
      config.set("train.batch_size", std::to_string(preset.batch_size), "mad");
      config.set("train.lr", format_real(point.lr), "mad");
      config.set("train.min_lr", format_real(preset.min_lr), "mad");
      config.set("train.warmup", "0", "mad");
      config.set("train.weight_decay", format_real(point.weight_decay), "mad");
      config.set("train.decay_vectors", "1", "mad");
      config.set("train.grad_clip", "0", "mad");
      config.set("train.eval_every", std::to_string(per_epoch), "mad");
      config.set("train.log_every", std::to_string(per_epoch), "mad");
      config.set("train.target", format_real(std::nextafter(preset.stop_accuracy, 1.0)), "mad");
      config.set("train.select_by", "loss", "mad");
      config.set("train.schedule_stage", std::to_string(per_epoch), "mad");
      config.set("train.keep_checkpoints", "1", "mad");
    }
    config.set("threads", std::to_string(o.threads), "mad");
    config.set("device", o.device, "--device");
    Run run = build_run(config, dir.string(), std::move(task));
    run.train.resume = resume;
    run.train.quiet = o.quiet;
    if (!resume) {
      fs::create_directories(dir);
      write_file_atomically((dir / "config.yaml").string(), config.to_yaml());
    }
    train(*run.model, *run.task, run.train);
  }
  const auto j = nlohmann::json::parse(read_file(summary_path.string()), nullptr, false);
  if (j.is_discarded() || !j.contains("best") || !j["best"].contains("accuracy"))
    throw Error("mad: " + summary_path.string() + " holds no best accuracy");
  return j["best"]["accuracy"].get<double>();
}

// Said above a table whose runs --max-steps cut short, or that tabulates only the runs already finished.
std::string table_notes(const MadOptions& o, int64_t runs_finished, int64_t runs_total) {
  std::string notes;
  if (!o.seeds.empty())
    notes += "Mean ± sample standard deviation over the model seeds " + join_seeds(o.seeds) + " (mad.json: each seed's).\n\n";
  if (o.max_steps > 0)
    notes += "Every run was capped at --max-steps " + std::to_string(o.max_steps) + ": a smoke test, not MAD's table.\n\n";
  if (o.finished_only)
    notes += "Finished runs only: " + std::to_string(runs_finished) + " of " + std::to_string(runs_total) +
             "; a dash marks a task with an unfinished run.\n\n";
  return notes;
}

}  // namespace

const std::vector<std::string>& mad_task_names() {
  static const std::vector<std::string> names = {"mad.in_context_recall", "mad.fuzzy_recall", "mad.noisy_recall",
                                                 "mad.selective_copy",    "mad.compression",  "mad.memorization"};
  return names;
}

MadPreset mad_preset(const std::string& name) {
  if (name == "paper") return paper_preset();
  if (name == "cpu") return cpu_preset();
  throw Error("unknown MAD preset '" + name + "'; valid presets: cpu, paper");
}

std::string mad_table_markdown(const std::vector<MadRow>& rows, const std::vector<std::string>& tasks) {
  std::ostringstream os;
  os << "| mixer |";
  for (const auto& t : tasks) os << " " << t.substr(t.find('.') + 1) << " |";
  os << " average |\n|---|";
  for (size_t i = 0; i < tasks.size(); ++i) os << "---|";
  os << "---|\n";
  char buf[64];
  for (const auto& r : rows) {
    os << "| `" << r.mixer << "` |";
    for (const auto& t : tasks) {
      if (r.scores.count(t) && r.spread.count(t)) {
        std::snprintf(buf, sizeof buf, " %.3f ± %.3f |", r.scores.at(t), r.spread.at(t));
        os << buf;
      } else if (r.scores.count(t)) {
        std::snprintf(buf, sizeof buf, " %.3f |", r.scores.at(t));
        os << buf;
      } else {
        os << " - |";
      }
    }
    if (std::isnan(r.average)) {
      os << " - |\n";
    } else if (!r.by_seed.empty()) {
      std::snprintf(buf, sizeof buf, " %.3f ± %.3f |\n", r.average, r.average_spread);
      os << buf;
    } else {
      std::snprintf(buf, sizeof buf, " %.3f |\n", r.average);
      os << buf;
    }
  }
  return os.str();
}

std::vector<MadRow> mad_mean_over_seeds(const std::vector<uint64_t>& seeds,
                                        const std::vector<std::vector<MadRow>>& tables) {
  if (tables.empty() || tables.size() != seeds.size())
    throw Error("mad: one table per seed is needed to average over seeds");
  std::vector<MadRow> rows;
  for (size_t i = 0; i < tables.front().size(); ++i) {
    MadRow row;
    row.mixer = tables.front()[i].mixer;
    std::map<std::string, std::vector<double>> values;  // task (or "average") -> one value per seed
    for (size_t s = 0; s < tables.size(); ++s) {
      if (tables[s].size() != tables.front().size() || tables[s][i].mixer != row.mixer)
        throw Error("mad: the seeds' tables do not list the same mixers");
      const MadRow& one = tables[s][i];
      auto& mine = row.by_seed[seeds[s]];
      for (const auto& [task, v] : one.scores) {
        values[task].push_back(v);
        mine[task] = v;
      }
      if (!std::isnan(one.average)) {
        values["average"].push_back(one.average);
        mine["average"] = one.average;
      }
    }
    row.average = NAN;
    for (const auto& [name, v] : values) {
      if (v.size() != tables.size()) continue;  // a seed has not finished this task: no mean
      const MeanStd m = mean_and_sample_std(v);
      if (name == "average") {
        row.average = m.mean;
        row.average_spread = m.std;
      } else {
        row.scores[name] = m.mean;
        row.spread[name] = m.std;
      }
    }
    rows.push_back(row);
  }
  return rows;
}

namespace {

// One seed's table: every mixer on every selected task (trained, resumed or reused).
std::vector<MadRow> mad_rows_of_seed(const MadOptions& o, const MadPreset& preset, const std::vector<std::string>& tasks,
                                     int64_t& runs_finished, int64_t& runs_total) {
  // A run directory is reused only by the same run: the residual joins the mixer's folder, and a seed other
  // than MAD's or a step cap marks the run's own folder.
  const std::string run_suffix = (o.seed != MadOptions{}.seed ? "-seed" + std::to_string(o.seed) : "") +
                                 (o.max_steps > 0 ? "-cap" + std::to_string(o.max_steps) : "");
  std::vector<MadRow> rows;
  for (const auto& mixer : o.mixers) {
    MadRow row;
    row.mixer = o.residual.empty() ? mixer : mixer + " with residual=" + o.residual;
    const std::string mixer_dir = slug(o.residual.empty() ? mixer : mixer + "|residual=" + o.residual);
    for (const auto& plan : preset.tasks) {
      if (std::find(tasks.begin(), tasks.end(), plan.task) == tasks.end()) continue;
      double total = 0;
      bool complete = true;
      for (size_t s = 0; s < plan.settings.size(); ++s) {
        double best = 0;
        for (const auto& point : preset.sweep) {
          const fs::path dir = fs::path(o.out_dir) / mixer_dir / plan.task /
                               ("setting" + std::to_string(s) + "-lr" + format_real(point.lr) + "-wd" +
                                format_real(point.weight_decay) + run_suffix);
          if (!o.quiet && !o.finished_only)
            std::printf("mad: %s on %s (lr %g, wd %g)\n", mixer.c_str(), plan.settings[s].c_str(), point.lr,
                        point.weight_decay);
          const double accuracy = mad_run(o, preset, plan, plan.settings[s], point, mixer, dir);
          ++runs_total;
          if (std::isnan(accuracy)) {
            complete = false;
          } else {
            ++runs_finished;
            best = std::max(best, accuracy);
          }
        }
        total += best;
      }
      if (complete) row.scores[plan.task] = total / static_cast<double>(plan.settings.size());
    }
    double sum = 0;
    for (const auto& [t, v] : row.scores) sum += v;
    const size_t row_tasks = std::count_if(preset.tasks.begin(), preset.tasks.end(), [&](const MadTaskPlan& plan) {
      return std::find(tasks.begin(), tasks.end(), plan.task) != tasks.end();
    });
    row.average = row.scores.size() < row_tasks ? NAN : sum / static_cast<double>(row.scores.size());
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

std::vector<MadRow> run_mad(const MadOptions& o) {
  if (o.mixers.empty()) throw Error("mad: name at least one --mixer");
  if (o.out_dir.empty()) throw Error("mad: --out is required");
  if (o.max_steps < 0) throw Error("mad: --max-steps must not be negative");
  if (o.finished_only && !fs::is_directory(o.out_dir))
    throw Error("mad: --finished-only tabulates the runs in --out, but '" + o.out_dir + "' is not a directory");
  const MadPreset preset = mad_preset(o.preset);
  std::vector<std::string> tasks = o.tasks.empty() ? mad_task_names() : o.tasks;
  for (const auto& t : tasks) {
    bool known = false;
    for (const auto& plan : preset.tasks) known = known || plan.task == t;
    if (!known) throw Error("mad: unknown MAD task '" + t + "'; valid tasks: mad.in_context_recall, mad.fuzzy_recall, "
                            "mad.noisy_recall, mad.selective_copy, mad.compression, mad.memorization");
  }
  std::vector<uint64_t> seeds = o.seeds.empty() ? std::vector<uint64_t>{o.seed} : o.seeds;
  if (std::set<uint64_t>(seeds.begin(), seeds.end()).size() != seeds.size()) throw Error("mad: --seeds lists a seed twice");
  int64_t runs_finished = 0, runs_total = 0;
  std::vector<std::vector<MadRow>> tables;
  for (const uint64_t seed : seeds) {
    MadOptions one = o;
    one.seed = seed;
    if (!o.quiet && !o.finished_only && !o.seeds.empty()) std::printf("mad: seed %llu\n", static_cast<unsigned long long>(seed));
    tables.push_back(mad_rows_of_seed(one, preset, tasks, runs_finished, runs_total));
  }
  const std::vector<MadRow> rows = o.seeds.empty() ? tables.front() : mad_mean_over_seeds(seeds, tables);

  nlohmann::ordered_json j;
  j["preset"] = preset.name;
  if (!o.seeds.empty()) j["seeds"] = o.seeds;
  if (o.max_steps > 0) j["max_steps"] = o.max_steps;
  if (o.finished_only) j["runs_finished"] = {{"finished", runs_finished}, {"total", runs_total}};
  j["rows"] = nlohmann::ordered_json::array();
  for (const auto& r : rows) {
    nlohmann::ordered_json scores = nlohmann::ordered_json::object();
    for (const auto& t : tasks)
      if (r.scores.count(t)) scores[t] = r.scores.at(t);
    nlohmann::ordered_json row = {
        {"mixer", r.mixer},
        {"scores", scores},
        {"average", std::isnan(r.average) ? nlohmann::ordered_json() : nlohmann::ordered_json(r.average)}};
    if (!o.seeds.empty()) {  // the means above, their sample standard deviations, and every seed's own scores
      nlohmann::ordered_json spread = nlohmann::ordered_json::object(), by_seed = nlohmann::ordered_json::object();
      for (const auto& t : tasks)
        if (r.spread.count(t)) spread[t] = r.spread.at(t);
      for (const auto& [seed, values] : r.by_seed) by_seed[std::to_string(seed)] = values;
      row["std"] = spread;
      row["average_std"] = std::isnan(r.average) ? nlohmann::ordered_json() : nlohmann::ordered_json(r.average_spread);
      row["by_seed"] = by_seed;
    }
    j["rows"].push_back(row);
  }
  fs::create_directories(o.out_dir);
  write_file_atomically((fs::path(o.out_dir) / "mad.json").string(), j.dump(2) + "\n");
  const std::string table = mad_table_markdown(rows, tasks);
  write_file_atomically((fs::path(o.out_dir) / "mad.md").string(),
                        "# MAD (" + preset.name + " preset)\n\nTest accuracy of the lowest-test-loss evaluation, best "
                        "of the lr/wd sweep per setting, mean over each task's settings.\n\n" +
                            table_notes(o, runs_finished, runs_total) + table);
  return rows;
}

}  // namespace seqmix
