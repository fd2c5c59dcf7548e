#pragma once
// What every fuzz target checks besides the sanitizers: bad input is a seqmix::Error with a one-line
// message, and a property that fails stops the fuzzer with the reason (a crash it saves as a reproducer).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "seqmix/io/error.h"

namespace seqmix::fuzz {

[[noreturn]] inline void fail(const std::string& why) {
  std::fprintf(stderr, "fuzz property failed: %s\n", why.c_str());
  std::abort();
}

inline void require(bool ok, const std::string& why) {
  if (!ok) fail(why);
}

// An error message for the user: one non-empty line.
inline void require_one_line(const Error& e) {
  const std::string m = e.what();
  require(!m.empty() && m.find('\n') == std::string::npos, "the error message is not one line: " + m);
}

inline std::string as_string(const uint8_t* data, size_t size) { return {reinterpret_cast<const char*>(data), size}; }

}  // namespace seqmix::fuzz
