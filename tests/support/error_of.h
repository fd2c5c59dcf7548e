#pragma once
// The message of the seqmix::Error that f throws, or "" when it throws none: tests then look for the
// words the message must hold.
#include <functional>
#include <string>

#include "seqmix/io/error.h"

namespace seqmix::testing {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace seqmix::testing
