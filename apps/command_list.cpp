// seqmix list: every registered component with its options, defaults and meanings.
#include <cstdio>

#include "commands.h"
#include "seqmix/models/model_factory.h"
#include "seqmix/models/registry.h"
#include "seqmix/tasks/task.h"

namespace seqmix::cli {

void add_list_command(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("list", "list mixers, channel mixers, residual schemes, models and tasks");
  sub->callback([&action] {
    action = [] {
      std::printf("Spec strings: name:key=value,key=value (e.g. softmax:heads=4,rope=1).\n\n");
      std::printf("%s\n", describe_components("Sequence mixers (--mixer)", mixer_infos()).c_str());
      std::printf("%s\n", describe_components("Channel mixers (model option channel=)", channel_mixer_infos()).c_str());
      std::printf("%s\n", describe_components("Residual schemes (model option residual=)", residual_infos()).c_str());
      std::printf("%s\n", describe_components("Models (--model)", model_infos()).c_str());
      std::printf("%s", describe_components("Tasks (--task)", task_infos()).c_str());
      return 0;
    };
  });
}

}  // namespace seqmix::cli
