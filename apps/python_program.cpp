// The commands written in Python (seqmix verify, seqmix bench --device cuda) run with the project's Python (the one
// the build found torch in; SEQMIX_PYTHON in the environment overrides it), this checkout's package and this
// build's libseqmix_ops.so: this process becomes that Python (execv), so its output and exit status are the command's.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "commands.h"
#include "seqmix/io/error.h"

namespace seqmix::cli {

void exec_project_python(const std::string& command, const std::vector<std::string>& python_arguments) {
  const char* override_python = std::getenv("SEQMIX_PYTHON");
  const std::string python = override_python && *override_python ? override_python : SEQMIX_PROJECT_PYTHON;
  if (access(python.c_str(), X_OK) != 0)
    throw Error(command + " runs with " + python + ", which cannot be run (" + std::strerror(errno) +
                "); run scripts/setup.sh, or set SEQMIX_PYTHON to a Python with torch");
  // This checkout's package and this build's library, ahead of whatever the environment names.
  const char* path = std::getenv("PYTHONPATH");
  const std::string python_path = std::string(SEQMIX_PROJECT_PACKAGE_DIR) + (path && *path ? ":" + std::string(path) : "");
  if (setenv("PYTHONPATH", python_path.c_str(), 1) != 0 || setenv("SEQMIX_OPS_LIBRARY", SEQMIX_PROJECT_OPS_LIBRARY, 1) != 0)
    throw Error(command + ": cannot set its environment: " + std::strerror(errno));
  std::vector<std::string> argv = {python};
  argv.insert(argv.end(), python_arguments.begin(), python_arguments.end());
  std::vector<char*> pointers;
  for (auto& a : argv) pointers.push_back(a.data());
  pointers.push_back(nullptr);
  execv(python.c_str(), pointers.data());
  throw Error(command + ": cannot run " + python + ": " + std::strerror(errno));
}

}  // namespace seqmix::cli
