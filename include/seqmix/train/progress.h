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
  static std::string format_duration(double seconds);

 private:
  int64_t total_, first_step_;
  std::FILE* out_;
  bool tty_;
  bool line_open_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace seqmix
