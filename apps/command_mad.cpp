// seqmix mad: the MAD benchmark for one or more mixers, printed as the papers' table.
#include <cstdio>

#include "commands.h"
#include "seqmix/train/device.h"
#include "seqmix/train/mad.h"

namespace seqmix::cli {

void add_mad_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<MadOptions>();
  auto* sub = app.add_subcommand("mad", "train mixers on the MAD tasks and print the table (mad.md, mad.json)");
  sub->add_option("--mixer", o->mixers, "mixer spec (repeat the flag per mixer)")->required();
  sub->add_option("--task", o->tasks, "MAD task (repeatable; default: all six)");
  sub->add_option("--preset", o->preset, "cpu (a reduction for 2 cores) or paper (MAD's exact protocol)")
      ->capture_default_str();
  sub->add_option("--out", o->out_dir, "output directory (finished runs in it are reused)")->required();
  sub->add_option("--threads", o->threads, "intra-op threads (0 = all hardware threads)");
  sub->add_option("--device", o->device, "cpu (default), cuda or cuda:N: where every run trains");
  auto* seed = sub->add_option("--seed", o->seed, "seed of the model initialisation")->capture_default_str();
  sub->add_option("--seeds", o->seeds,
                  "several model seeds, comma-separated (e.g. 12345,1,2): each seed's table, then the mean ± sample "
                  "std of every cell (mad.json keeps each seed's); 12345's runs are the ones --seed 12345 trains")
      ->delimiter(',')
      ->excludes(seed);
  sub->add_flag("--quiet", o->quiet, "no per-step progress");
  sub->add_option("--residual", o->residual,
                  "residual scheme of every run's backbone, e.g. momentum (MomenMHA blocks) or nesterov (NagMHA)");
  sub->add_option("--max-steps", o->max_steps,
                  "cap every run at N steps (a smoke test of the command: the table is then not MAD's; 0 = no cap)");
  sub->add_flag("--finished-only", o->finished_only,
                "train nothing: tabulate the runs already finished in --out (a dash marks a task with an unfinished run)");
  sub->callback([&action, o] {
    action = [o] {
      parse_device(o->device, "--device");  // before any run folder is made
      const auto rows = run_mad(*o);
      std::printf("\n%s", mad_table_markdown(rows, o->tasks.empty() ? mad_task_names() : o->tasks).c_str());
      if (o->max_steps > 0)
        std::printf("\nevery run was capped at --max-steps %lld: a smoke test, not MAD's table\n",
                    static_cast<long long>(o->max_steps));
      if (o->finished_only) std::printf("\nfinished runs only: a dash marks a task with an unfinished run\n");
      std::printf("\nwritten to %s/mad.md and %s/mad.json\n", o->out_dir.c_str(), o->out_dir.c_str());
      return 0;
    };
  });
}

}  // namespace seqmix::cli
