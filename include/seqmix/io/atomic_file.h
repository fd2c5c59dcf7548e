#pragma once
// Atomic file writes: the content goes to a temporary file in the same directory, is fsync'ed, then
// renamed over the destination (and the directory fsync'ed), so a reader sees the old file or the new
// one, never a torn write.
#include <string>

namespace seqmix {

void write_file_atomically(const std::string& path, const std::string& content);
std::string read_file(const std::string& path);  // throws Error if unreadable

}  // namespace seqmix
