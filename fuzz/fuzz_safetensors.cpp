// Fuzzes the safetensors reader (checkpoints and weight files): any bytes either parse or give a
// one-line Error; what parses serializes and parses back to the same names, dtypes, shapes and bytes.
#include <ATen/ATen.h>

#include <cstring>

#include "fuzz_support.h"
#include "seqmix/io/safetensors.h"

using namespace seqmix;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SafetensorsFile file;
  try {
    file = parse_safetensors(fuzz::as_string(data, size), "fuzz.safetensors");
  } catch (const Error& e) {
    fuzz::require_one_line(e);
    return 0;
  }
  const SafetensorsFile back = parse_safetensors(serialize_safetensors(file.tensors, file.metadata), "round trip");
  fuzz::require(back.tensors.size() == file.tensors.size() && back.metadata == file.metadata,
                "a re-serialized file holds other tensors or metadata");
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    const auto& [name, t] = file.tensors[i];
    const auto& [name2, t2] = back.tensors[i];
    fuzz::require(name == name2 && t.scalar_type() == t2.scalar_type() && t.sizes() == t2.sizes(),
                  "tensor '" + name + "' changed name, dtype or shape in a round trip");
    const auto a = t.contiguous(), b = t2.contiguous();
    fuzz::require(a.nbytes() == 0 || std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0,
                  "tensor '" + name + "' changed bytes");
  }
  return 0;
}
