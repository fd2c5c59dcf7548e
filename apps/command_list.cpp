// seqmix list: every registered component with its options, defaults and meanings; --ops: the op table.
#include <cstdio>

#include "commands.h"
#include "seqmix/models/model_factory.h"
#include "seqmix/models/registry.h"
#include "seqmix/ops/op_table.h"
#include "seqmix/tasks/task.h"
#include "seqmix/train/run.h"

namespace seqmix::cli {
namespace {

// The op table: each family's operators (with their impls) and benchmark cases (with their inputs).
void print_op_table() {
  std::printf("Op families (src/ops/<family>/declare.cpp): operators torch.ops.seqmix.<op> [impls], and the cases of "
              "seqmix bench --op.\n\n");
  for (const auto& family : ops::op_families()) {
    std::printf("%s\n", family.name.c_str());
    for (const auto& op : family.torch_ops) {
      const std::string impls = op.impls.names();
      std::printf("  op    %s%s\n", op.name.c_str(), impls.empty() ? "" : ("  [" + impls + "]").c_str());
    }
    for (const auto& c : family.bench_cases)
      std::printf("  bench %s  [%s]  %s\n", c.name.c_str(), c.impls.names().c_str(), c.inputs.c_str());
  }
}

}  // namespace

void add_list_command(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand(
      "list", "list mixers, channel mixers, residual schemes, models, tasks and run config keys (--ops: the ops)");
  auto ops_only = std::make_shared<bool>(false);
  sub->add_flag("--ops", *ops_only, "print the op table instead: op families, their operators and benchmark cases");
  sub->callback([&action, ops_only] {
    action = [ops_only] {
      if (*ops_only) {
        print_op_table();
        return 0;
      }
      std::printf("Spec strings: name:key=value,key=value (e.g. softmax:heads=4,rope=1).\n\n");
      std::printf("%s\n", describe_components("Sequence mixers (--mixer)", mixer_infos()).c_str());
      std::printf("%s\n", describe_components("Channel mixers (model option channel=)", channel_mixer_infos()).c_str());
      std::printf("%s\n", describe_components("Residual schemes (model option residual=)", residual_infos()).c_str());
      std::printf("%s\n", describe_components("Models (--model)", model_infos()).c_str());
      std::printf("%s\n", describe_components("Tasks (--task)", task_infos()).c_str());
      std::printf("%s", describe_components("Run config (train --config FILE, --set key=value)",
                                            {{"config", "the keys of a run's config.yaml", run_config_schema()}})
                            .c_str());
      return 0;
    };
  });
}

}  // namespace seqmix::cli
