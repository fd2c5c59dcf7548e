#include "seqmix/io/interrupt.h"

#include <csignal>

#include <atomic>

namespace seqmix {
namespace {

std::atomic<int> received{0};

void on_stop_signal(int signal) { received.store(signal); }

}  // namespace

void install_stop_signals() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;  // a second signal takes the default action: the process ends
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int stop_signal() { return received.load(); }

}  // namespace seqmix
