#pragma once
// Atomic file writes: the content goes to a temporary file in the same directory, is fsync'ed, then
// renamed over the destination (and the directory fsync'ed), so a reader sees the old file or the new
// one, never a torn write.
#include <cstdint>
#include <string>

namespace seqmix {

void write_file_atomically(const std::string& path, const std::string& content);
// Removes the temporary files ".NAME.tmp-XXXXXX" that writes killed midway left in dir (not recursive);
// returns how many. Only for a directory no other process is writing to.
int remove_stale_temporaries(const std::string& dir);
// The whole of a regular file. Throws Error naming the path when it is unreadable, not a regular file (a device,
// pipe or directory: /dev/zero would never end), or larger than max_input_bytes().
std::string read_file(const std::string& path);
// The most bytes seqmix reads from one file: $SEQMIX_MAX_INPUT_BYTES, else this machine's physical memory.
int64_t max_input_bytes();

}  // namespace seqmix
