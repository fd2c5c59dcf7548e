#include "seqmix/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "seqmix/io/error.h"

namespace seqmix {
namespace {

std::string errno_text() { return std::strerror(errno); }

void fsync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& content) {
  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.parent_path();
  std::string tmpl = (dir.empty() ? std::string(".") : dir.string()) + "/." + target.filename().string() + ".tmp-XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) throw Error("cannot create a temporary file next to " + path + ": " + errno_text());
  const std::string tmp(name.data());
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string why = errno_text();
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error("cannot write " + path + ": " + why + "; the previous file is kept");
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw Error("cannot flush " + path + ": " + why + "; the previous file is kept");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw Error("cannot move " + tmp + " to " + path + ": " + why);
  }
  fsync_directory(dir);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot read " + path + ": " + errno_text());
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw Error("cannot read " + path);
  return ss.str();
}

}  // namespace seqmix
