#pragma once
// safetensors files: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range, then the raw little-endian data. Written atomically (temporary file, fsync,
// rename); read with every field checked, so a truncated or corrupt file is a clear error.
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

namespace seqmix {

struct SafetensorsFile {
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // in file order
  std::map<std::string, std::string> metadata;
  const at::Tensor& at(const std::string& name) const;       // throws Error naming the file's contents
  bool contains(const std::string& name) const;
};

// The bytes of a safetensors file holding tensors (any supported dtype, made contiguous on CPU).
std::string serialize_safetensors(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});
// Writes serialize_safetensors(...) to path atomically.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
SafetensorsFile read_safetensors(const std::string& path);
// Parses an in-memory image of a file (what read_safetensors reads; used by the fuzzer).
SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& source_name);

}  // namespace seqmix
