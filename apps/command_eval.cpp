// seqmix eval: re-evaluates a run's checkpoint on its task's test set.
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "seqmix/train/device.h"
#include "seqmix/train/run.h"

namespace seqmix::cli {

void add_eval_command(CLI::App& app, Action& action) {
  struct Args {
    std::string run, weights;
    std::vector<std::string> task_options;
    int64_t step = -1;
    bool json = false;
    int threads = 0;
    std::string device = "cpu";
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("eval", "re-evaluate a run's checkpoint on its test set");
  sub->add_option("--run", a->run, "run directory")->required();
  auto* step = sub->add_option("--step", a->step, "checkpoint step (default: the latest)");
  sub->add_option("--weights", a->weights,
                  "evaluate the run's model with the weights of this safetensors file instead of a checkpoint's (e.g. "
                  "safetensors.torch.save_file(model.state_dict(), path, metadata={'format': 'pt'}) from Python)")
      ->excludes(step);
  sub->add_option("--task-option", a->task_options,
                  "replace an option of the run's task spec, KEY=VALUE (repeatable), e.g. heldout=test to evaluate a "
                  "fashion_mnist run on the test images instead of its validation split");
  sub->add_flag("--json", a->json, "print one JSON object");
  sub->add_option("--threads", a->threads, "intra-op threads (0 = all hardware threads)");
  sub->add_option("--device", a->device, "cpu (default), cuda or cuda:N: where the model and the test batches live");
  sub->callback([&action, a] {
    action = [a] {
      parse_device(a->device, "--device");
      int64_t step = 0;
      Run run = load_run(a->run, a->threads, a->step, step, a->weights, a->task_options, a->device);
      const Metrics m = evaluate(*run.model, *run.task, nullptr, run.train.precision);
      if (a->json) {
        nlohmann::json j = {{"run", a->run}};
        if (a->weights.empty()) j["step"] = step;
        else j["weights"] = a->weights;
        for (const auto& [k, v] : m) j[k] = v;
        std::printf("%s\n", j.dump().c_str());
      } else {
        const std::string weights =
            a->weights.empty() ? "checkpoint at step " + std::to_string(step) : "weights " + a->weights;
        std::printf("run %s, %s, test set of %lld examples\n", a->run.c_str(), weights.c_str(),
                    static_cast<long long>(run.task->test_set().size()));
        for (const auto& [k, v] : m) std::printf("  %-16s %.6f\n", k.c_str(), v);
      }
      return 0;
    };
  });
}

}  // namespace seqmix::cli
