// The commands written in Python, run with the project's Python (the one the build found torch in) on this build's
// libseqmix_ops.so, their arguments passed on (`--help` lists them):
//   seqmix verify     certificates for sequence mixers (docs/verify.md). They live in one place,
//                     python/seqmix/verify.py, because they serve a researcher's own PyTorch modules as well as
//                     seqmix's mixers.
//   seqmix export-hf  a text run as a Hugging Face transformers folder (python/seqmix/hf/export.py; docs/python.md).
#include <memory>
#include <string>
#include <vector>

#include "commands.h"

namespace seqmix::cli {
namespace {

struct PythonCommand {
  const char* name;         // seqmix's subcommand and python -m seqmix's
  const char* description;  // for seqmix --help
};

constexpr PythonCommand kPythonCommands[] = {
    {"verify", "certify sequence mixers: causality (NaN and gradients too), decode = forward, fused = naive, packing, "
               "padding, finite differences, batch independence, determinism, dtypes (docs/verify.md; --help for "
               "options)"},
    {"export-hf", "write a text run as a Hugging Face transformers folder: RUN OUT [--step N] (AutoModelForCausalLM, "
                  "AutoTokenizer, pipeline, lm-eval; docs/python.md)"},
};

}  // namespace

void add_python_commands(CLI::App& app, Action& action) {
  for (const PythonCommand& command : kPythonCommands) {
    auto* sub = app.add_subcommand(command.name, command.description);
    // Every argument, --help included, goes to the Python program, which parses and documents them.
    sub->prefix_command();
    sub->set_help_flag();
    const std::string name = command.name;
    sub->callback([&action, sub, name] {
      auto arguments = std::make_shared<std::vector<std::string>>(sub->remaining());
      action = [arguments, name]() -> int {
        std::vector<std::string> python_arguments = {"-m", "seqmix", name};
        python_arguments.insert(python_arguments.end(), arguments->begin(), arguments->end());
        exec_project_python("seqmix " + name, python_arguments);
      };
    });
  }
}

}  // namespace seqmix::cli
