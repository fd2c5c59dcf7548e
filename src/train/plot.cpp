#include "seqmix/train/plot.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "seqmix/io/atomic_file.h"
#include "seqmix/io/child_process.h"
#include "seqmix/io/error.h"

namespace seqmix {
namespace fs = std::filesystem;
namespace {

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string primary_metric(const fs::path& run) {
  const fs::path summary = run / "summary.json";
  if (fs::exists(summary)) {
    const auto j = nlohmann::json::parse(read_file(summary.string()), nullptr, false);
    if (!j.is_discarded() && j.contains("metric") && j["metric"].is_string()) return j["metric"].get<std::string>();
  }
  return "accuracy";
}

// The legend name of run r: its folder's name, or parent/name when another run's folder has the same name (the
// seed-0 folders of `train --seeds` runs of several mixers).
std::string series_name(const std::vector<std::string>& run_dirs, size_t r) {
  auto last = [](const fs::path& p) { return p.filename().empty() ? p.parent_path() : p; };
  const fs::path run = last(fs::path(run_dirs[r]));
  for (size_t other = 0; other < run_dirs.size(); ++other)
    if (other != r && last(fs::path(run_dirs[other])).filename() == run.filename())
      return (run.parent_path().filename() / run.filename()).string();
  return run.filename().string();
}

// What gnuplot said, on one line: its messages about the script ("<script>" line N: ...) and the system errors
// under them, without the echoed script line; otherwise its last line, or its exit status.
std::string gnuplot_messages(const std::string& err, const std::string& script_path, int status) {
  const std::string prefix = "\"" + script_path + "\" line ";
  std::string messages, last;
  std::istringstream lines(err);
  for (std::string line; std::getline(lines, line);) {
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    last = line;
    if (line.rfind(prefix, 0) == 0) {
      const size_t colon = line.find(": ", prefix.size());
      line = colon == std::string::npos ? line : line.substr(colon + 2);
    } else if (line.rfind("system error: ", 0) != 0) {
      continue;
    }
    messages += (messages.empty() ? "" : "; ") + line;
  }
  if (!messages.empty()) return messages;
  if (!last.empty()) return last;
  return WIFEXITED(status) ? "it exited with status " + std::to_string(WEXITSTATUS(status)) + " and said nothing"
                           : "it was killed by signal " + std::to_string(WTERMSIG(status));
}

}  // namespace

void plot_runs(const std::vector<std::string>& run_dirs, const std::string& png_path, const std::string& metric) {
  if (run_dirs.empty()) throw Error("plot: name at least one run directory");
  char tmpl[] = "/tmp/seqmix-plot-XXXXXX";
  if (!mkdtemp(tmpl)) throw Error("plot: cannot create a temporary directory");
  const fs::path tmp(tmpl);
  struct RemovedAtExit {  // the data files and script, whether the plot is drawn or refused
    fs::path dir;
    ~RemovedAtExit() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } remove_tmp{tmp};
  std::string loss_plots, metric_plots, metric_label;
  for (size_t r = 0; r < run_dirs.size(); ++r) {
    const fs::path run(run_dirs[r]);
    const fs::path log = run / "metrics.jsonl";
    if (!fs::exists(log)) throw Error("plot: " + log.string() + " does not exist");
    const std::string name = series_name(run_dirs, r);
    const std::string m = metric.empty() ? primary_metric(run) : metric;
    if ((", " + metric_label + ", ").find(", " + m + ", ") == std::string::npos)  // each metric named once
      metric_label += (metric_label.empty() ? "" : ", ") + m;
    std::ofstream train(tmp / ("train" + std::to_string(r) + ".dat")), test(tmp / ("test" + std::to_string(r) + ".dat"));
    const std::string content = read_file(log.string());
    std::istringstream in(content);
    std::string line;
    int64_t points = 0, evaluations = 0, with_metric = 0, line_number = 0;
    std::set<std::string> evaluated;  // the metrics the evaluation lines hold
    // A number, or NaN where the log holds none (JSON writes a NaN as null).
    auto number = [](const nlohmann::json& v) { return v.is_number() ? v.get<double>() : NAN; };
    while (std::getline(in, line)) {
      ++line_number;
      const bool torn_last = in.eof() && !content.empty() && content.back() != '\n';  // what a kill leaves
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        if (torn_last || line.empty()) continue;
        throw Error("plot: " + log.string() + " line " + std::to_string(line_number) + " is not a JSON object");
      }
      if (!j.contains("step") || !j.contains("split") || !j.contains("loss") || !j["step"].is_number_integer()) continue;
      const auto step = j["step"].get<int64_t>();
      if (j["split"] == "train") {
        train << step << " " << number(j["loss"]) << "\n";
      } else if (j["split"] == "test") {
        test << step << " " << number(j["loss"]) << " " << (j.contains(m) ? number(j[m]) : NAN) << "\n";
        ++evaluations;
        with_metric += j.contains(m) && j[m].is_number();
        for (const auto& [key, value] : j.items())
          if (value.is_number() && key != "step") evaluated.insert(key);
      }
      ++points;
    }
    if (points == 0) throw Error("plot: " + log.string() + " holds no metrics");
    if (evaluations == 0)
      throw Error("plot: run " + run.string() + " has no evaluations yet (its metrics.jsonl holds training lines only; "
                  "the first comes at train.eval_every)");
    if (with_metric == 0) {
      std::string have;
      for (const auto& key : evaluated) have += (have.empty() ? "" : ", ") + key;
      throw Error("plot: the evaluations of run " + run.string() + " have no metric '" + m + "'; they have: " + have);
    }
    const std::string id = std::to_string(r);
    loss_plots += (r ? ", " : "") + quoted((tmp / ("train" + id + ".dat")).string()) + " using 1:2 with lines lc " +
                  std::to_string(r + 1) + " title " + quoted(name + " train") + ", " +
                  quoted((tmp / ("test" + id + ".dat")).string()) + " using 1:2 with linespoints dt 2 lc " +
                  std::to_string(r + 1) + " title " + quoted(name + " test");
    metric_plots += (r ? ", " : "") + quoted((tmp / ("test" + id + ".dat")).string()) +
                    " using 1:3 with linespoints lc " + std::to_string(r + 1) + " title " + quoted(name);
  }
  const std::string script =
      "set terminal pngcairo size 1400,500 font ',10' noenhanced\n"
      "set output " + quoted(png_path) + "\n"
      "set multiplot layout 1,2\n"
      "set grid\nset key outside bottom center horizontal\nset xlabel 'step'\n"
      "set title 'loss'\nset logscale y\nplot " + loss_plots + "\n"
      "unset logscale y\nset title " + quoted("test " + metric_label) + "\nplot " + metric_plots + "\n"
      "unset multiplot\n";
  const fs::path script_path = tmp / "plot.gp";
  write_file_atomically(script_path.string(), script);
  if (find_program("gnuplot").empty()) throw Error("plot: gnuplot is not installed (apt-get install gnuplot-nox)");
  const ChildResult gnuplot = run_child("gnuplot", {"gnuplot", script_path.string()}, {.capture_output = true});
  if (!gnuplot.succeeded())
    throw Error("plot: gnuplot failed writing " + png_path + ": " +
                gnuplot_messages(gnuplot.err, script_path.string(), gnuplot.status));
}

}  // namespace seqmix
