#pragma once
// The decode state of a sequence mixer: named tensors (KV caches, recurrent states, conv windows) and
// the number of tokens consumed so far.
#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace seqmix {

struct DecodeState {
  int64_t position = 0;
  std::map<std::string, at::Tensor> tensors;
  at::Tensor& operator[](const std::string& key) { return tensors[key]; }
};

}  // namespace seqmix
