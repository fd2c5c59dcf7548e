// seqmix plot: loss and metric curves of runs to PNG.
#include "commands.h"
#include "seqmix/train/plot.h"

namespace seqmix::cli {

void add_plot_command(CLI::App& app, Action& action) {
  struct Args {
    std::vector<std::string> runs;
    std::string out = "curves.png";
    std::string metric;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("plot", "render loss and metric curves of one or more runs to PNG (gnuplot)");
  sub->add_option("runs", a->runs, "run directories")->required();
  sub->add_option("--out", a->out, "PNG file")->capture_default_str();
  sub->add_option("--metric", a->metric, "test metric to plot (default: each run's primary metric)");
  sub->callback([&action, a] {
    action = [a] {
      plot_runs(a->runs, a->out, a->metric);
      std::printf("wrote %s\n", a->out.c_str());
      return 0;
    };
  });
}

}  // namespace seqmix::cli
