#include "seqmix/io/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "seqmix/io/error.h"

extern char** environ;

namespace seqmix {
namespace {

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  for (auto& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

void close_pair(int fds[2]) {
  for (int i = 0; i < 2; ++i)
    if (fds[i] >= 0) ::close(fds[i]);
}

}  // namespace

std::string find_program(const std::string& program) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0 ? program : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

StartedChild start_child(const std::string& program, const std::vector<std::string>& arguments,
                         const ChildOptions& options) {
  const std::string path = find_program(program);
  if (path.empty()) throw Error("cannot run " + program + ": no such program" +
                                (program.find('/') == std::string::npos ? " in PATH" : ""));
  std::vector<std::string> argument_strings = arguments.empty() ? std::vector<std::string>{program} : arguments;
  std::vector<char*> argv = pointers(argument_strings);
  std::vector<std::string> environment_strings = options.environment;
  std::vector<char*> envp = pointers(environment_strings);
  char** env = options.environment.empty() ? environ : envp.data();

  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (options.capture_output && (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)) {
    const int error = errno;
    close_pair(out);
    close_pair(err);
    throw Error("cannot run " + program + ": cannot create a pipe: " + std::strerror(error));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    close_pair(out);
    close_pair(err);
    throw Error("cannot run " + program + ": cannot start a process: " + std::strerror(error));
  }
  if (pid == 0) {  // the child: async-signal-safe calls only
    if (options.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(1);  // the parent died before prctl took effect
    }
    if (options.default_signals) {
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
    }
    if (options.capture_output && (::dup2(out[1], STDOUT_FILENO) < 0 || ::dup2(err[1], STDERR_FILENO) < 0)) ::_exit(127);
    ::execve(path.c_str(), argv.data(), env);
    static const char message[] = "seqmix: error: cannot start a child process (execve failed)\n";
    [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, message, sizeof message - 1);
    ::_exit(127);
  }
  StartedChild child;
  child.pid = pid;
  if (options.capture_output) {
    ::close(out[1]);
    ::close(err[1]);
    child.out_fd = out[0];
    child.err_fd = err[0];
  }
  return child;
}

ChildResult run_child(const std::string& program, const std::vector<std::string>& arguments,
                      const ChildOptions& options) {
  const StartedChild child = start_child(program, arguments, options);
  ChildResult result;
  if (options.capture_output) {
    pollfd fds[2] = {{child.out_fd, POLLIN, 0}, {child.err_fd, POLLIN, 0}};
    std::string* sinks[2] = {&result.out, &result.err};
    for (int open = 2; open > 0;) {
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || fds[i].revents == 0) continue;
        char buffer[4096];
        const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
        if (n > 0) {
          sinks[i]->append(buffer, static_cast<size_t>(n));
        } else if (n == 0 || errno != EINTR) {
          ::close(fds[i].fd);
          fds[i].fd = -1;
          --open;
        }
      }
    }
    for (const auto& f : fds)
      if (f.fd >= 0) ::close(f.fd);
  }
  while (::waitpid(child.pid, &result.status, 0) < 0 && errno == EINTR) continue;
  return result;
}

std::string how_child_ended(int status) {
  if (WIFSIGNALED(status)) {
    const int s = WTERMSIG(status);
    return "was killed by signal " + std::to_string(s) + " (" + strsignal(s) + ")";
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

bool child_failed(int status) { return WIFSIGNALED(status) || !WIFEXITED(status) || WEXITSTATUS(status) != 0; }

bool ChildResult::succeeded() const { return !child_failed(status); }
std::string ChildResult::how_it_ended() const { return how_child_ended(status); }

}  // namespace seqmix
