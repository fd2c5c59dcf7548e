#pragma once
// Loss and metric curves of one or more runs (their metrics.jsonl) rendered to PNG with gnuplot.
#include <string>
#include <vector>

namespace seqmix {

// Writes a two-panel PNG (train and test loss; the test metric) to png_path. metric empty: each run's
// primary metric from summary.json (or "accuracy"). Throws Error when a run has no metrics or gnuplot
// fails.
void plot_runs(const std::vector<std::string>& run_dirs, const std::string& png_path, const std::string& metric);

}  // namespace seqmix
