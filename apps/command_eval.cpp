// seqmix eval: re-evaluates a run's checkpoint on its task's test set.
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "seqmix/train/run.h"

namespace seqmix::cli {

void add_eval_command(CLI::App& app, Action& action) {
  struct Args {
    std::string run;
    int64_t step = -1;
    bool json = false;
    int threads = 0;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("eval", "re-evaluate a run's checkpoint on its test set");
  sub->add_option("--run", a->run, "run directory")->required();
  sub->add_option("--step", a->step, "checkpoint step (default: the latest)");
  sub->add_flag("--json", a->json, "print one JSON object");
  sub->add_option("--threads", a->threads, "intra-op threads (0 = all hardware threads)");
  sub->callback([&action, a] {
    action = [a] {
      int64_t step = 0;
      Run run = load_run(a->run, a->threads, a->step, step);
      const Metrics m = evaluate(*run.model, *run.task);
      if (a->json) {
        nlohmann::json j = {{"run", a->run}, {"step", step}};
        for (const auto& [k, v] : m) j[k] = v;
        std::printf("%s\n", j.dump().c_str());
      } else {
        std::printf("run %s, checkpoint at step %lld, test set of %lld examples\n", a->run.c_str(),
                    static_cast<long long>(step), static_cast<long long>(run.task->test_set().size()));
        for (const auto& [k, v] : m) std::printf("  %-16s %.6f\n", k.c_str(), v);
      }
      return 0;
    };
  });
}

}  // namespace seqmix::cli
