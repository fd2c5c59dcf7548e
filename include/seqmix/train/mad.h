#pragma once
// The MAD benchmark protocol (specs/mad.md 3-5) over seqmix's tasks and trainer.
//   paper: MAD exactly: width 128, 2 blocks, every task's difficulty ladder (66 settings), 200 epochs,
//          batch 128, lr {1e-4, 5e-4, 1e-3} x wd {0, 0.1}, cosine per epoch to 1e-6, weight decay on every
//          parameter, stop at test accuracy > 0.999, the lowest-test-loss evaluation scored, best of the sweep
//          per setting, mean over a task's settings.
//   cpu:   a documented reduction for 2 cores: each task's baseline setting only (shorter sequences and
//          fewer examples for the recall and copying tasks), batch 64, one lr (3e-3) and wd 0.1, a few
//          epochs; scoring as in paper.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace seqmix {

struct MadSweepPoint {
  double lr;
  double weight_decay;
};

struct MadTaskPlan {
  std::string task;                   // e.g. mad.in_context_recall
  std::vector<std::string> settings;  // task specs, baseline first
  int64_t epochs = 200;
};

struct MadPreset {
  std::string name;
  std::vector<MadTaskPlan> tasks;
  std::vector<MadSweepPoint> sweep;
  int64_t batch_size = 128;
  double min_lr = 1e-6;
  double stop_accuracy = 0.999;  // stop after the first evaluation strictly above this
};

MadPreset mad_preset(const std::string& name);  // "cpu" or "paper"; throws Error otherwise
const std::vector<std::string>& mad_task_names();

struct MadRow {
  std::string mixer;
  std::map<std::string, double> scores;  // task -> accuracy in [0, 1]; a task with unfinished runs is absent
  double average = 0;                    // over the row's tasks; NaN when one of them is absent
  // Over several seeds (mad --seeds): scores and average are the means, these the sample standard deviations
  // (present for the same tasks as scores), and by_seed each seed's own scores ("average" among them).
  std::map<std::string, double> spread;
  double average_spread = 0;
  std::map<uint64_t, std::map<std::string, double>> by_seed;
};

struct MadOptions {
  std::vector<std::string> mixers;
  std::vector<std::string> tasks;  // empty = all six
  std::string preset = "cpu";
  std::string out_dir;
  int threads = 0;
  std::string device = "cpu";  // where every run trains: cpu, cuda or cuda:N
  uint64_t seed = 12345;
  std::vector<uint64_t> seeds;  // several model seeds: each one's table, then their mean ± sample std (empty: seed)
  bool quiet = false;
  int64_t max_steps = 0;  // > 0: cap every run at this many steps (a smoke test; the table is then not MAD's)
  std::string residual;   // residual scheme of every run's backbone (e.g. momentum: MomenMHA blocks); "" = its default
  bool finished_only = false;  // train nothing: tabulate the runs already finished in out_dir
};

// Trains every mixer on every task of the preset (runs already finished in out_dir are reused), prints
// and writes out_dir/mad.md and out_dir/mad.json, and returns the rows. With finished_only it trains nothing
// and tabulates what has finished: a task with an unfinished run has no score, and its row no average.
// With seeds, every seed's runs are trained (a seed other than MAD's 12345 marks its runs' folders) and the
// rows are their mean ± sample std (mad_mean_over_seeds).
std::vector<MadRow> run_mad(const MadOptions& options);

// Rows of one table per seed (the same mixers in the same order) -> one row per mixer holding each task's mean
// and sample standard deviation over the seeds; a task (or average) that one seed lacks is absent (NaN).
std::vector<MadRow> mad_mean_over_seeds(const std::vector<uint64_t>& seeds,
                                        const std::vector<std::vector<MadRow>>& tables);

// The table of the papers: one row per mixer, one column per task, plus the average (Markdown); a missing
// score or average is written as a dash, and a row over several seeds writes "mean ± std".
std::string mad_table_markdown(const std::vector<MadRow>& rows, const std::vector<std::string>& tasks);

}  // namespace seqmix
