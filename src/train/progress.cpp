#include "seqmix/train/progress.h"

#include <unistd.h>

#include <cmath>

namespace seqmix {

Progress::Progress(int64_t total_steps, int64_t first_step, std::FILE* out)
    : total_(total_steps), first_step_(first_step), out_(out), tty_(isatty(fileno(out)) != 0), start_(std::chrono::steady_clock::now()) {}

std::string Progress::format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

void Progress::update(int64_t step, double loss, const std::string& metric_name, double metric,
                      double tokens_per_s) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = eta_seconds(elapsed - eval_seconds_, step - first_step_, total_ - step, eval_seconds_, evals_done_,
                                 evaluations_after(step, total_, eval_every_));
  // A task whose metric is the loss itself (text) shows it once.
  char metric_text[96] = "";
  if (metric_name != "loss") std::snprintf(metric_text, sizeof metric_text, "  %s %.4f", metric_name.c_str(), metric);
  char buf[256];
  std::snprintf(buf, sizeof buf, "step %lld/%lld  loss %.4f%s  %.0f tok/s  ETA %s", static_cast<long long>(step),
                static_cast<long long>(total_), loss, metric_text, tokens_per_s, format_duration(eta).c_str());
  if (tty_) {
    std::fprintf(out_, "\r\033[K%s", buf);
    line_open_ = true;
  } else {
    std::fprintf(out_, "%s\n", buf);
  }
  std::fflush(out_);
}

void Progress::evaluated(double seconds) {
  eval_seconds_ += seconds;
  evals_done_ += 1;
}

double Progress::eta_seconds(double train_seconds, int64_t steps_done, int64_t steps_left, double eval_seconds,
                             int64_t evals_done, int64_t evals_left) {
  if (steps_done <= 0) return NAN;
  double eta = train_seconds / static_cast<double>(steps_done) * static_cast<double>(steps_left);
  if (evals_done > 0) eta += eval_seconds / static_cast<double>(evals_done) * static_cast<double>(evals_left);
  return eta;
}

int64_t Progress::evaluations_after(int64_t step, int64_t total, int64_t every) {
  if (step >= total) return 0;
  if (every <= 0) return 1;
  // Multiples of `every` in (step, total], and the last step when it is not one.
  return total / every - step / every + (total % every != 0 ? 1 : 0);
}

void Progress::line(const std::string& text) {
  if (tty_ && line_open_) std::fprintf(out_, "\r\033[K");
  std::fprintf(out_, "%s\n", text.c_str());
  line_open_ = false;
  std::fflush(out_);
}

void Progress::finish() {
  if (tty_ && line_open_) std::fprintf(out_, "\n");
  line_open_ = false;
  std::fflush(out_);
}

}  // namespace seqmix
