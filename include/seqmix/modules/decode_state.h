#pragma once
// The decode state of a sequence mixer: the number of tokens consumed so far, and the mixer's own state, a typed
// struct (its KV cache, recurrent state, conv window) that only that mixer reads.
#include <any>
#include <cstdint>
#include <string>

#include "seqmix/io/error.h"

namespace seqmix {

struct DecodeState {
  int64_t position = 0;
  std::any data;

  template <class S>
  static DecodeState of(S state) {
    DecodeState s;
    s.data = std::move(state);
    return s;
  }
  // The mixer's state of type S; throws Error naming `mixer` when the state was made by another kind of mixer.
  template <class S>
  S& as(const std::string& mixer) {
    if (auto* s = std::any_cast<S>(&data)) return *s;
    throw Error("mixer " + mixer + ": this decode state was made by another kind of mixer; start from this mixer's "
                "init_state");
  }
};

}  // namespace seqmix
