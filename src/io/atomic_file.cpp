#include "seqmix/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>
#include <sstream>

#include "seqmix/io/error.h"
#include "seqmix/io/fault_injection.h"
#include "seqmix/io/runtime.h"

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

// The process's file-creation mask (read once: umask can only be read by setting it).
mode_t process_umask() {
  static const mode_t mask = [] {
    const mode_t m = ::umask(0);
    ::umask(m);
    return m;
  }();
  return mask;
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
  // mkstemp makes the file 0600; the finished file follows the umask like any other tool's output (0644 under the
  // usual 022), so colleagues can read a run.
  if (::fchmod(fd, 0666 & ~process_umask()) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error("cannot write " + path + ": " + why);
  }
  std::error_code ec;
  const std::string kept = std::filesystem::exists(target, ec) ? "; the previous version is kept" : "; the file was not created";
  const size_t allowed = fault::bytes_allowed(content.size());  // content.size() unless a fault is injected
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = written < allowed ? ::write(fd, content.data() + written, allowed - written) : -1;
    if (n < 0 && written >= allowed) fault::after_partial_write();
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string why = errno_text();
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error("cannot write " + path + ": " + why + kept);
    }
    written += static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  const std::string sync_error = synced ? "" : errno_text();
  const bool closed = ::close(fd) == 0;  // closed even when fsync failed
  if (!synced || !closed) {
    const std::string why = synced ? errno_text() : sync_error;
    ::unlink(tmp.c_str());
    throw Error("cannot flush " + path + ": " + why + kept);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw Error("cannot move " + tmp + " to " + path + ": " + why);
  }
  fsync_directory(dir);
}

int remove_stale_temporaries(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t tag = name.rfind(".tmp-");
    // The template of write_file_atomically: "." + name + ".tmp-" + six characters from mkstemp.
    if (name.size() > 1 && name[0] == '.' && tag != std::string::npos && name.size() == tag + 11 &&
        entry.is_regular_file(ec) && std::filesystem::remove(entry.path(), ec))
      ++removed;
  }
  return removed;
}

int64_t max_input_bytes() {
  const char* text = std::getenv("SEQMIX_MAX_INPUT_BYTES");
  if (text == nullptr || *text == '\0') return physical_memory_bytes();
  errno = 0;
  char* end = nullptr;
  const long long bytes = std::strtoll(text, &end, 10);
  if (*end != '\0' || errno == ERANGE || bytes < 1)
    throw Error("SEQMIX_MAX_INPUT_BYTES must be a positive number of bytes (got '" + std::string(text) + "')");
  return bytes;
}

namespace {

// bytes as "12 bytes", "3.4 MB" or "5.6 GB".
std::string size_text(double bytes) {
  if (bytes < 1e6) return std::to_string(static_cast<int64_t>(bytes)) + " bytes";
  if (bytes < 1e9) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MB", bytes / 1e6);
    return text;
  }
  return gigabytes(bytes);
}

// What a path that is not a regular file is, for the error that refuses it.
std::string kind_of(std::filesystem::file_type type) {
  switch (type) {
    case std::filesystem::file_type::directory: return "a directory";
    case std::filesystem::file_type::character: return "a character device";
    case std::filesystem::file_type::block: return "a block device";
    case std::filesystem::file_type::fifo: return "a pipe";
    case std::filesystem::file_type::socket: return "a socket";
    default: return "not a regular file";
  }
}

}  // namespace

std::string read_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!ec && status.type() != fs::file_type::regular && status.type() != fs::file_type::not_found)
    throw Error("cannot read " + path + ": it is " + kind_of(status.type()) + ", not a regular file");
  const int64_t limit = max_input_bytes();
  const bool set = std::getenv("SEQMIX_MAX_INPUT_BYTES") && *std::getenv("SEQMIX_MAX_INPUT_BYTES");
  const auto too_big = [&](double bytes) {
    return Error("cannot read " + path + ": it holds " + size_text(bytes) + ", more than " +
                 (set ? "the " + size_text(static_cast<double>(limit)) + " SEQMIX_MAX_INPUT_BYTES allows"
                      : "this machine's memory (" + size_text(static_cast<double>(limit)) +
                            "), the most seqmix reads from one file unless SEQMIX_MAX_INPUT_BYTES raises it"));
  };
  const auto size = fs::file_size(path, ec);
  if (!ec && static_cast<double>(size) > static_cast<double>(limit)) throw too_big(static_cast<double>(size));
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot read " + path + ": " + errno_text());
  // Read in chunks up to the limit: a file may grow while it is read, or report no size (/proc).
  std::string content;
  std::vector<char> chunk(1 << 20);
  while (f.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || f.gcount() > 0) {
    content.append(chunk.data(), static_cast<size_t>(f.gcount()));
    if (static_cast<int64_t>(content.size()) > limit) throw too_big(static_cast<double>(content.size()));
  }
  if (f.bad()) throw Error("cannot read " + path + ": " + errno_text());
  return content;
}

}  // namespace seqmix
