#pragma once
// The options every key-value attention mixer shares (softmax, relu, mha2nd1st, light2nd1st), for their
// declarations.
#include <vector>

#include "seqmix/layers/kv_attention.h"
#include "seqmix/layers/mixer_spec.h"

namespace seqmix {

// heads, rope, rope_theta, bias, causal, then `extra`.
template <class O>
std::vector<Field<O>> kv_attention_fields(const std::vector<Field<O>>& extra) {
  std::vector<Field<O>> fields = {
      Field<O>::integer("heads", &O::heads, "number of heads (must divide the width)", 1),
      Field<O>::flag("rope", &O::rope, "rotary position embedding on q and k"),
      Field<O>::real("rope_theta", &O::rope_theta, "RoPE base", 1.0),
      Field<O>::flag("bias", &O::bias, "biases in the q/k/v and output projections"),
      Field<O>::flag("causal", &O::causal, "causal (decoder) or bidirectional (encoder)")};
  fields.insert(fields.end(), extra.begin(), extra.end());
  return fields;
}

}  // namespace seqmix
