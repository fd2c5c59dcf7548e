#include "seqmix/dist/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "seqmix/io/child_process.h"
#include "seqmix/io/error.h"

extern char** environ;

namespace seqmix::dist {
namespace {

volatile sig_atomic_t g_forwarded_signal = 0;

void remember_signal(int signal_number) { g_forwarded_signal = signal_number; }

std::string this_program(const std::string& command) {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw Error(command + " --nproc: cannot find this program's path (/proc/self/exe)");
  return std::string(path, static_cast<size_t>(n));
}

// Each worker's environment: this process's, with its rank's variables (torchrun's names) in place of any it had.
std::vector<std::vector<std::string>> worker_environments(int nproc, const std::string& port) {
  std::vector<std::vector<std::string>> environments(static_cast<size_t>(nproc));
  for (int rank = 0; rank < nproc; ++rank) {
    auto& e = environments[static_cast<size_t>(rank)];
    for (char** entry = environ; *entry != nullptr; ++entry) {
      const std::string text(*entry);
      const std::string name = text.substr(0, text.find('='));
      if (name != "RANK" && name != "LOCAL_RANK" && name != "WORLD_SIZE" && name != "LOCAL_WORLD_SIZE" &&
          name != "MASTER_ADDR" && name != "MASTER_PORT" && name != "TORCHELASTIC_USE_AGENT_STORE")
        e.push_back(text);
    }
    e.insert(e.end(), {"RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank),
                       "WORLD_SIZE=" + std::to_string(nproc), "LOCAL_WORLD_SIZE=" + std::to_string(nproc),
                       "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port});
  }
  return environments;
}

}  // namespace

// The kernel picks the port for a socket bound to port 0; the caller binds it moments later.
int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(std::string("cannot open a socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t size = sizeof address;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0;
  const int error = errno;
  ::close(fd);
  if (!ok) throw Error(std::string("cannot find a free loopback port: ") + std::strerror(error));
  return ntohs(address.sin_port);
}

int run_local_workers(const std::string& command, const std::vector<std::string>& arguments, int nproc,
                      std::chrono::seconds grace) {
  if (nproc < 1 || nproc > 256) throw Error(command + ": --nproc " + std::to_string(nproc) + " must be in 1..256");
  const std::string program = this_program(command);
  std::string port;
  try {
    port = std::to_string(free_loopback_port());
  } catch (const Error& e) {
    throw Error(command + " --nproc: " + e.what());
  }
  std::fflush(stdout);
  std::fflush(stderr);

  const std::vector<std::vector<std::string>> environments = worker_environments(nproc, port);
  std::vector<std::string> argv = {program};
  argv.insert(argv.end(), arguments.begin(), arguments.end());

  // SIGINT/SIGTERM to the launcher: passed on to the workers, which then end the job themselves. The
  // previous handlers come back when the job is over (bench runs several jobs).
  g_forwarded_signal = 0;
  struct sigaction action {}, previous_int {}, previous_term {};
  action.sa_handler = remember_signal;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, &previous_int);
  ::sigaction(SIGTERM, &action, &previous_term);
  struct RestoreHandlers {
    struct sigaction *interrupt, *terminate;
    ~RestoreHandlers() {
      ::sigaction(SIGINT, interrupt, nullptr);
      ::sigaction(SIGTERM, terminate, nullptr);
    }
  } restore{&previous_int, &previous_term};

  std::vector<pid_t> workers(static_cast<size_t>(nproc), -1);
  for (int rank = 0; rank < nproc; ++rank) {
    try {
      // The worker dies with its launcher, even one killed with SIGKILL.
      workers[static_cast<size_t>(rank)] =
          start_child(program, argv,
                      {.environment = environments[static_cast<size_t>(rank)], .die_with_parent = true,
                       .default_signals = true})
              .pid;
    } catch (...) {  // the workers already started must not outlive a launcher that gives up
      for (pid_t w : workers)
        if (w > 0) ::kill(w, SIGKILL);
      try {
        throw;
      } catch (const Error& e) {
        throw Error(command + " --nproc: cannot start a worker: " + e.what());
      }
    }
  }

  auto rank_of = [&](pid_t pid) {
    for (size_t r = 0; r < workers.size(); ++r)
      if (workers[r] == pid) return static_cast<int>(r);
    return -1;
  };
  int running = nproc;
  std::string first_failure;
  bool stopping = false, stopped_others = false;
  auto stop_the_others = [&](int signal_number) {
    for (pid_t w : workers)
      if (w > 0) ::kill(w, signal_number);
  };
  auto deadline = std::chrono::steady_clock::time_point::max();
  while (running > 0) {
    if (g_forwarded_signal != 0) {
      stop_the_others(g_forwarded_signal);
      if (first_failure.empty()) first_failure = std::string("the launcher received ") + strsignal(g_forwarded_signal);
      g_forwarded_signal = 0;
      stopping = true;
      deadline = std::chrono::steady_clock::now() + grace;
    }
    // Polled, so that a signal arriving at any moment is seen within 50 ms.
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;  // no child left
    }
    if (pid == 0) {  // nobody ended yet
      if (stopping && std::chrono::steady_clock::now() > deadline) stop_the_others(SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    const int rank = rank_of(pid);
    if (rank < 0) continue;
    workers[static_cast<size_t>(rank)] = -1;
    --running;
    if (child_failed(status) && first_failure.empty()) {
      first_failure = "worker rank " + std::to_string(rank) + " of " + std::to_string(nproc) + " " + how_child_ended(status);
      if (running > 0) {
        stop_the_others(SIGTERM);
        stopped_others = true;
        stopping = true;
        deadline = std::chrono::steady_clock::now() + grace;
      }
    }
  }
  if (first_failure.empty()) return 0;
  std::fprintf(stderr, "seqmix: error: %s --nproc %d: %s%s\n", command.c_str(), nproc, first_failure.c_str(),
               stopped_others ? "; the other workers were stopped" : "");
  return 1;
}

}  // namespace seqmix::dist
