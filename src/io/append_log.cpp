#include "seqmix/io/append_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "seqmix/io/error.h"
#include "seqmix/io/fault_injection.h"

namespace seqmix {

AppendLog::AppendLog(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) throw Error("cannot write " + path_ + ": " + std::strerror(errno));
}

AppendLog::~AppendLog() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendLog::append_line(const std::string& line) {
  struct stat before {};
  if (::fstat(fd_, &before) != 0) throw Error("cannot write " + path_ + ": " + std::strerror(errno));
  const std::string content = line + "\n";
  const size_t allowed = fault::log_bytes_allowed(content.size());
  size_t done = 0;
  int error = 0;
  while (done < allowed) {
    const ssize_t n = ::write(fd_, content.data() + done, allowed - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : EIO;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (done < content.size() && error == 0) {
    fault::after_partial_write();
    error = errno;
  }
  if (done == content.size()) return;
  // A torn line would make the whole log unreadable: back to the last complete line.
  const bool cut = ::ftruncate(fd_, before.st_size) == 0;
  throw Error("cannot write " + path_ + ": " + std::strerror(error) +
              (cut ? "; the run stops here, the log keeps every line before this one"
                   : "; its last line may be torn (the next --resume drops it)"));
}

}  // namespace seqmix
