#pragma once
// One writer per run folder: an exclusive OS lock (flock) on DIR/.seqmix.lock, held from before the first write
// to the process's end, with the holder's pid in the file. A second `seqmix train --out DIR` or `--resume DIR`
// while the first runs gets one line naming the folder and that pid, and touches nothing. The OS drops the lock
// when the holder exits, however it exits (a SIGKILL included), so a stale lock file never blocks a resume.
#include <string>

namespace seqmix {

class RunFolderLock {
 public:
  // Locks dir (which must exist); throws Error if another process holds it or the lock file cannot be written.
  explicit RunFolderLock(const std::string& dir);
  ~RunFolderLock();
  RunFolderLock(const RunFolderLock&) = delete;
  RunFolderLock& operator=(const RunFolderLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace seqmix
