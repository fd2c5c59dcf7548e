#pragma once
// The decode state of a sequence mixer: the number of tokens consumed so far, and the mixer's own state, a typed
// struct (its KV cache, recurrent state, conv window) that only that mixer reads.
#include <c10/core/TensorOptions.h>

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

// The options of a recurrent decode state (a running sum or maximum over every token so far) for a mixer whose
// weights have `weights`: float32 where the weights are bfloat16 or float16, as they are otherwise, on their device.
// The forward reads through ops that compute in float32; a state summed in reduced precision over thousands of
// steps would drift from it. (A KV cache holds what the forward computed, and keeps the weights' dtype.)
inline c10::TensorOptions recurrent_state_options(const c10::TensorOptions& weights) {
  const c10::ScalarType type = weights.dtype().toScalarType();
  return type == c10::kHalf || type == c10::kBFloat16 ? weights.dtype(c10::kFloat) : weights;
}

}  // namespace seqmix
