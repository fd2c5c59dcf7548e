#pragma once
// The one exception type for user-facing failures: bad specs, configs, data files, checkpoints.
// Its message is a complete sentence that names the problem; the CLI prints it on one line.
#include <stdexcept>
#include <string>

namespace seqmix {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// The first line of a message: what the CLI prints of an exception whose text goes on (c10 errors carry a
// source location, CLI11's its usage, after the message).
inline std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace seqmix
