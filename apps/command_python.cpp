// seqmix verify: certificates for sequence mixers (docs/verify.md). The certificates live in one place,
// python/seqmix/verify.py, because they serve a researcher's own PyTorch modules as well as seqmix's mixers; this
// command runs them for registered mixers with the project's Python (the one the build found torch in) on this
// build's libseqmix_ops.so, passing its arguments on (`seqmix verify --help` lists them).
#include <memory>
#include <string>
#include <vector>

#include "commands.h"

namespace seqmix::cli {
namespace {

int run_verify(const std::vector<std::string>& arguments) {
  std::vector<std::string> python_arguments = {"-m", "seqmix", "verify"};
  python_arguments.insert(python_arguments.end(), arguments.begin(), arguments.end());
  exec_project_python("seqmix verify", python_arguments);
}

}  // namespace

void add_verify_command(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("verify", "certify sequence mixers: causality (NaN and gradients too), decode = "
                                           "forward, fused = naive, packing, padding, finite differences, batch "
                                           "independence, determinism, dtypes (docs/verify.md; --help for options)");
  // Every argument, --help included, goes to python/seqmix/verify.py, which parses and documents them.
  sub->prefix_command();
  sub->set_help_flag();
  sub->callback([&action, sub] {
    auto arguments = std::make_shared<std::vector<std::string>>(sub->remaining());
    action = [arguments] { return run_verify(*arguments); };
  });
}

}  // namespace seqmix::cli
