#pragma once
// The seqmix program as a child process of a test: started with arguments and extra environment, its
// stdout and stderr in a log file, waited for with a bound.
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace seqmix::testing {

class ChildProcess {
 public:
  // Starts SEQMIX_BINARY with `arguments`; output goes to `log_path`.
  ChildProcess(const std::vector<std::string>& arguments, const std::string& log_path,
               const std::map<std::string, std::string>& environment = {})
      : ChildProcess(SEQMIX_BINARY, arguments, log_path, environment) {}
  // Starts `program` (a path) with `arguments`.
  ChildProcess(const std::string& program, const std::vector<std::string>& arguments, const std::string& log_path,
               const std::map<std::string, std::string>& environment);
  ~ChildProcess();  // kills a child still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The exit code (128 + signal for a killed child), or nullopt if it is still running after `limit`.
  std::optional<int> wait_for(std::chrono::seconds limit);
  std::string log() const;

 private:
  pid_t pid_ = -1;
  bool finished_ = false;
  int code_ = 0;
  std::string log_path_;
};

// Runs seqmix to completion (at most 10 minutes); the exit code. The log is in log_path.
int run_seqmix(const std::vector<std::string>& arguments, const std::string& log_path,
               const std::map<std::string, std::string>& environment = {});

// A path of this test process's scratch folder, with nothing there (what an earlier test left is removed) and
// its parent created; the whole folder is removed when the test process exits.
std::filesystem::path scratch_path(const std::string& name);
// The processes whose parent is `parent` (from /proc).
std::vector<pid_t> child_pids(pid_t parent);
// The value of an environment variable of a running process (from /proc/PID/environ), or "".
std::string environment_of(pid_t pid, const std::string& name);

}  // namespace seqmix::testing
