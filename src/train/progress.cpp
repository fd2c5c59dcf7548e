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
  const int64_t done = step - first_step_;
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total_ - step) : NAN;
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
