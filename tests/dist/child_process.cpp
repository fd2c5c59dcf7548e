#include "child_process.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace seqmix::testing {

ChildProcess::ChildProcess(const std::string& program, const std::vector<std::string>& arguments,
                           const std::string& log_path, const std::map<std::string, std::string>& environment)
    : log_path_(log_path) {
  pid_ = ::fork();
  if (pid_ == 0) {
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    for (const auto& [name, value] : environment) ::setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> argv{const_cast<char*>(program.c_str())};
    for (const auto& a : arguments) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(program.c_str(), argv.data());
    std::_Exit(127);
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !finished_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

std::optional<int> ChildProcess::wait_for(std::chrono::seconds limit) {
  if (finished_) return code_;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      finished_ = true;
      code_ = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
      return code_;
    }
    if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string ChildProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int run_seqmix(const std::vector<std::string>& arguments, const std::string& log_path,
               const std::map<std::string, std::string>& environment) {
  ChildProcess child(arguments, log_path, environment);
  return child.wait_for(std::chrono::minutes(10)).value_or(-1);
}

namespace {

std::filesystem::path scratch_root() {
  return std::filesystem::temp_directory_path() / ("seqmix_dist_test_" + std::to_string(::getpid()));
}

const struct RemoveScratchAtExit {
  ~RemoveScratchAtExit() {
    std::error_code ignored;
    std::filesystem::remove_all(scratch_root(), ignored);
  }
} remove_scratch_at_exit;

}  // namespace

std::filesystem::path scratch_path(const std::string& name) {
  const std::filesystem::path path = scratch_root() / name;
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path.parent_path());
  return path;
}

std::vector<pid_t> child_pids(pid_t parent) {
  std::vector<pid_t> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
    std::istringstream rest(line.substr(line.rfind(')') + 1));
    std::string state;
    pid_t ppid = 0;
    if (rest >> state >> ppid && ppid == parent) children.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return children;
}

std::string environment_of(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ");
  std::string entry;
  while (std::getline(in, entry, '\0'))
    if (entry.rfind(name + "=", 0) == 0) return entry.substr(name.size() + 1);
  return "";
}

}  // namespace seqmix::testing
