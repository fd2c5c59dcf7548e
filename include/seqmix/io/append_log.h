#pragma once
// An append-only log of lines (a run's metrics.jsonl): each line goes to disk whole or not at all. Every write is
// checked; one that fails (a full disk, an I/O error) cuts the file back to its last complete line and throws one
// line naming the file, so everything logged before stays valid and readable. The file is created with the
// process's umask like any other tool's output.
#include <string>

namespace seqmix {

class AppendLog {
 public:
  explicit AppendLog(std::string path);  // opens for appending, creating it if needed; throws Error if it cannot
  ~AppendLog();
  AppendLog(const AppendLog&) = delete;
  AppendLog& operator=(const AppendLog&) = delete;
  // Appends line + "\n" (line holds no newline).
  void append_line(const std::string& line);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace seqmix
