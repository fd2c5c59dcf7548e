#include "seqmix/io/safetensors.h"

#include <ATen/ATen.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "seqmix/io/atomic_file.h"
#include "seqmix/io/error.h"

namespace seqmix {
namespace {

struct DtypeName {
  at::ScalarType type;
  const char* name;
};
constexpr DtypeName kDtypes[] = {{at::kDouble, "F64"}, {at::kFloat, "F32"},  {at::kHalf, "F16"},
                                 {at::kBFloat16, "BF16"}, {at::kLong, "I64"}, {at::kInt, "I32"},
                                 {at::kShort, "I16"},   {at::kChar, "I8"},    {at::kByte, "U8"},
                                 {at::kBool, "BOOL"}};

const char* dtype_name(at::ScalarType t) {
  for (const auto& d : kDtypes)
    if (d.type == t) return d.name;
  throw Error(std::string("safetensors: dtype ") + c10::toString(t) + " is not supported");
}

bool dtype_of(const std::string& name, at::ScalarType& out) {
  for (const auto& d : kDtypes)
    if (name == d.name) {
      out = d.type;
      return true;
    }
  return false;
}

}  // namespace

const at::Tensor& SafetensorsFile::at(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  throw Error("safetensors: no tensor named '" + name + "'");
}

bool SafetensorsFile::contains(const std::string& name) const {
  for (const auto& kv : tensors)
    if (kv.first == name) return true;
  return false;
}

std::string serialize_safetensors(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__" || header.contains(name)) throw Error("safetensors: duplicate tensor name '" + name + "'");
    auto c = t.detach().to(at::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(c.numel()) * c.element_size();
    header[name] = {{"dtype", dtype_name(c.scalar_type())}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(c);
  }
  std::string head = header.dump();
  head.append((8 - head.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  std::string out(8, '\0');
  const uint64_t n = head.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += head;
  out.reserve(out.size() + offset);
  for (const auto& c : data) out.append(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
  return out;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomically(path, serialize_safetensors(tensors, metadata));
}

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& source) {
  const std::string where = "safetensors file " + source;
  if (bytes.size() < 8) throw Error(where + " is truncated (no header length)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (n > bytes.size() - 8) throw Error(where + " is truncated (header of " + std::to_string(n) + " bytes)");
  nlohmann::ordered_json header;  // keeps the file's tensor order
  try {
    header = nlohmann::ordered_json::parse(bytes.substr(8, n));
  } catch (const nlohmann::json::exception&) {
    throw Error(where + " has a malformed JSON header");
  }
  if (!header.is_object()) throw Error(where + " has a header that is not a JSON object");
  const uint64_t data_size = bytes.size() - 8 - n;
  const char* data = bytes.data() + 8 + n;
  SafetensorsFile file;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) throw Error(where + ": __metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) throw Error(where + ": metadata value '" + m.key() + "' is not a string");
        file.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const std::string name = it.key();
    const auto& e = *it;
    at::ScalarType type;
    if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !dtype_of(e["dtype"].get<std::string>(), type))
      throw Error(where + ": tensor '" + name + "' has a missing or unknown dtype");
    if (!e.contains("shape") || !e["shape"].is_array()) throw Error(where + ": tensor '" + name + "' has no shape");
    std::vector<int64_t> shape;
    uint64_t numel = 1;
    for (const auto& s : e["shape"]) {
      if (!s.is_number_unsigned()) throw Error(where + ": tensor '" + name + "' has a bad shape entry");
      const uint64_t d = s.get<uint64_t>();
      if (d > (1ull << 40) || (d > 0 && numel > (1ull << 40) / d)) throw Error(where + ": tensor '" + name + "' is implausibly large");
      numel *= d;
      shape.push_back(static_cast<int64_t>(d));
    }
    const auto& off = e.contains("data_offsets") ? e["data_offsets"] : nlohmann::ordered_json();
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw Error(where + ": tensor '" + name + "' has no valid data_offsets");
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    const uint64_t elem = static_cast<uint64_t>(c10::elementSize(type));
    if (begin > end || end > data_size)
      throw Error(where + " is truncated or corrupt: tensor '" + name + "' lies outside the data");
    if (end - begin != numel * elem)
      throw Error(where + ": tensor '" + name + "' has " + std::to_string(end - begin) + " bytes for " +
                  std::to_string(numel) + " elements");
    ranges.emplace_back(begin, end);
    auto t = at::empty(shape, at::TensorOptions().dtype(type));
    if (end > begin) std::memcpy(t.data_ptr(), data + begin, end - begin);
    file.tensors.emplace_back(name, t);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) throw Error(where + ": tensors overlap in the data section");
  return file;
}

SafetensorsFile read_safetensors(const std::string& path) { return parse_safetensors(read_file(path), path); }

}  // namespace seqmix
