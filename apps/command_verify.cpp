// seqmix verify: certificates for sequence mixers (docs/verify.md). The certificates live in one place,
// python/seqmix/verify.py, because they serve a researcher's own PyTorch modules as well as seqmix's mixers; this
// command runs them for registered mixers with the project's Python (the one the build found torch in) on this
// build's libseqmix_ops.so, passing its arguments on (`seqmix verify --help` lists them).
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "seqmix/io/error.h"

namespace seqmix::cli {
namespace {

int run_verify(const std::vector<std::string>& arguments) {
  const char* override_python = std::getenv("SEQMIX_PYTHON");
  const std::string python = override_python && *override_python ? override_python : SEQMIX_VERIFY_PYTHON;
  if (access(python.c_str(), X_OK) != 0)
    throw Error("seqmix verify runs python/seqmix/verify.py with " + python + ", which cannot be run (" +
                std::strerror(errno) + "); run scripts/setup.sh, or set SEQMIX_PYTHON to a Python with torch");
  // This checkout's package and this build's library, ahead of whatever the environment names.
  const char* path = std::getenv("PYTHONPATH");
  const std::string python_path = std::string(SEQMIX_VERIFY_PACKAGE_DIR) + (path && *path ? ":" + std::string(path) : "");
  if (setenv("PYTHONPATH", python_path.c_str(), 1) != 0 || setenv("SEQMIX_OPS_LIBRARY", SEQMIX_VERIFY_OPS_LIBRARY, 1) != 0)
    throw Error(std::string("seqmix verify: cannot set its environment: ") + std::strerror(errno));
  std::vector<std::string> argv = {python, "-m", "seqmix", "verify"};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  std::vector<char*> pointers;
  for (auto& a : argv) pointers.push_back(a.data());
  pointers.push_back(nullptr);
  execv(python.c_str(), pointers.data());
  throw Error("seqmix verify: cannot run " + python + ": " + std::strerror(errno));
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
