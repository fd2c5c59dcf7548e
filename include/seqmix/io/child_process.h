#pragma once
// Child processes, started one way: the benchmark's isolated cases (this program again, its output captured), the
// data-parallel launcher's workers (this program with a rank's environment, dying with the launcher) and plot's
// gnuplot. Everything the child needs is prepared before fork, so the child calls async-signal-safe functions only
// (this process may already run LibTorch's threads).
#include <sys/types.h>

#include <string>
#include <vector>

namespace seqmix {

struct ChildOptions {
  std::vector<std::string> environment;  // "NAME=value" entries; empty: this process's environment
  bool capture_output = false;           // stdout and stderr into pipes the caller reads (else inherited)
  bool die_with_parent = false;          // SIGTERM to the child when the thread that started it ends (prctl's
                                         // PDEATHSIG), which the launcher's main thread does only by dying
  bool default_signals = false;          // SIGINT and SIGTERM at their default action in the child
};

struct StartedChild {
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;  // the read ends of the child's stdout and stderr (capture_output), else -1
};

// Starts `program` (a path, or a name looked up in PATH) with argv `arguments` (argv[0] first). Throws Error naming
// the program when it cannot be found or the process cannot be made; an exec that fails in the child exits 127.
StartedChild start_child(const std::string& program, const std::vector<std::string>& arguments,
                         const ChildOptions& options = {});

struct ChildResult {
  int status = 0;        // as waitpid gives it
  std::string out, err;  // captured output (capture_output)
  bool succeeded() const;
  // "exited with code 3", "was killed by signal 9 (Killed)".
  std::string how_it_ended() const;
};

// start_child, then every captured byte read and the child waited for.
ChildResult run_child(const std::string& program, const std::vector<std::string>& arguments,
                      const ChildOptions& options = {});

// How a waitpid status ended: "exited with code N" or "was killed by signal N (name)"; whether it failed.
std::string how_child_ended(int status);
bool child_failed(int status);

// The path `program` runs as: itself when it names a path (has a '/'), else the first executable of that name in
// PATH; empty when there is none.
std::string find_program(const std::string& program);

}  // namespace seqmix
