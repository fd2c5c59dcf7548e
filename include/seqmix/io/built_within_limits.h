#pragma once
// Building a component (a mixer, a model, a task) whose options ask for more than there is: LibTorch refuses a
// storage size that overflows or a negative dimension, an allocation fails, a std::vector exceeds max_size. Each
// becomes one Error that names the component by its spec, so the option at fault is on the line.
#include <c10/util/Exception.h>

#include <new>
#include <stdexcept>
#include <string>

#include "seqmix/io/error.h"

namespace seqmix {

// build(), with those failures as Error("<what> cannot be built: <why>"); `what` is e.g. "mixer fem:qk_dim=...".
template <class Build>
auto built_within_limits(const std::string& what, Build&& build) -> decltype(build()) {
  try {
    return build();
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw Error(what + " cannot be built: " + first_line(e.what_without_backtrace()));
  } catch (const std::bad_alloc&) {
    throw Error(what + " cannot be built: its tensors do not fit in memory");
  } catch (const std::length_error& e) {
    throw Error(what + " cannot be built: a size is beyond what this machine can hold (" + first_line(e.what()) + ")");
  }
}

}  // namespace seqmix
