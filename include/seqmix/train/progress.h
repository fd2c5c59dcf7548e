#pragma once
// The progress line: on a terminal one line rewritten in place (step/total, loss, metric, tokens/s, ETA);
// elsewhere plain lines, one per report.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace seqmix {

class Progress {
 public:
  // first_step: the step this process starts from (> 0 when resuming), so the ETA extrapolates from the
  // steps this process has run.
  Progress(int64_t total_steps, int64_t first_step = 0, std::FILE* out = stdout);
  // Reports training progress after `step` steps.
  void update(int64_t step, double loss, const std::string& metric_name, double metric, double tokens_per_s);
  // Prints a full line (e.g. an evaluation), keeping the progress line intact on a terminal.
  void line(const std::string& text);
  void finish();
  // Evaluations every `every` steps (0: none but the last) and one at the last step: the ETA adds their time,
  // measured by evaluated(), once one has run.
  void set_evaluation_schedule(int64_t every) { eval_every_ = every; }
  void evaluated(double seconds);
  static std::string format_duration(double seconds);
  // The ETA: the mean time of a training step (evaluations excluded) times the steps left, plus the mean time of
  // an evaluation times the evaluations left (none counted before one has been measured); NaN before any step.
  static double eta_seconds(double train_seconds, int64_t steps_done, int64_t steps_left, double eval_seconds,
                            int64_t evals_done, int64_t evals_left);
  // The evaluations after `step` up to `total` under an evaluation every `every` steps (0: only the last).
  static int64_t evaluations_after(int64_t step, int64_t total, int64_t every);

 private:
  int64_t total_, first_step_;
  int64_t eval_every_ = 0, evals_done_ = 0;
  double eval_seconds_ = 0;
  std::FILE* out_;
  bool tty_;
  bool line_open_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace seqmix
