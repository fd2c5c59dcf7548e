#include "seqmix/io/fault_injection.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>

namespace seqmix::fault {
namespace {

struct Armed {
  int64_t kill_at_write = 0;  // 0 = off
  int64_t disk_bytes = -1;    // < 0 = off
};

int64_t env_integer(const char* name, int64_t off) {
  const char* text = std::getenv(name);
  if (!text || !*text) return off;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  return (*end == '\0' && value >= 0) ? value : off;
}

const Armed& armed() {
  static const Armed a{env_integer("SEQMIX_FAULT_KILL_AT_WRITE", 0), env_integer("SEQMIX_FAULT_DISK_BYTES", -1)};
  return a;
}

int64_t writes = 0, bytes_written = 0, log_bytes_written = 0;
bool killing = false;

}  // namespace

size_t bytes_allowed(size_t size) {
  const Armed& a = armed();
  ++writes;
  if (a.kill_at_write > 0 && writes == a.kill_at_write) {
    killing = true;
    if (size == 0) std::raise(SIGKILL);  // nothing to cut in half: die before the rename
    return size / 2;
  }
  if (a.disk_bytes >= 0) {
    const int64_t room = std::max<int64_t>(0, a.disk_bytes - bytes_written);
    const size_t allowed = static_cast<size_t>(std::min<int64_t>(room, static_cast<int64_t>(size)));
    bytes_written += static_cast<int64_t>(allowed);
    return allowed;
  }
  return size;
}

size_t log_bytes_allowed(size_t size) {
  static const int64_t log_bytes = env_integer("SEQMIX_FAULT_LOG_BYTES", -1);
  if (log_bytes < 0) return size;
  const int64_t room = std::max<int64_t>(0, log_bytes - log_bytes_written);
  const size_t allowed = static_cast<size_t>(std::min<int64_t>(room, static_cast<int64_t>(size)));
  log_bytes_written += static_cast<int64_t>(allowed);
  return allowed;
}

void after_partial_write() {
  if (killing) {
    std::raise(SIGKILL);
  }
  errno = ENOSPC;
}

}  // namespace seqmix::fault
