#include "seqmix/io/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "seqmix/io/error.h"

namespace seqmix {

RunFolderLock::RunFolderLock(const std::string& dir) {
  const std::string path = dir + "/.seqmix.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) throw Error("cannot write " + path + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char pid[32] = {};
    const ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (error == EWOULDBLOCK)
      throw Error("run folder " + dir + " is in use by another seqmix process" +
                  (n > 0 ? " (pid " + std::string(pid, static_cast<size_t>(n)) + ")" : std::string()) +
                  "; one process writes a run at a time");
    throw Error("cannot lock " + path + ": " + std::strerror(error));
  }
  const std::string me = std::to_string(::getpid());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size()))
    throw Error("cannot write " + path + ": " + std::strerror(errno));
}

RunFolderLock::~RunFolderLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace seqmix
