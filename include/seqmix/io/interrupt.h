#pragma once
// Ctrl-C and `kill` (SIGINT, SIGTERM) as a request to stop: after install_stop_signals(), the first such signal
// only sets a flag that a long loop (the trainer's, after each step) polls with stop_signal() to finish cleanly
// (a checkpoint, then exit); a second one ends the process at once (the default action is restored).
namespace seqmix {

void install_stop_signals();
// The signal number received (SIGINT or SIGTERM), or 0.
int stop_signal();

}  // namespace seqmix
