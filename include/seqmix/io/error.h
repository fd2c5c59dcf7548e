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

}  // namespace seqmix
