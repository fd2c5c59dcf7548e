#pragma once
// IDX files (LeCun's MNIST format, also Fashion-MNIST's): a big-endian magic 0x00 0x00 <type> <rank>, then rank
// big-endian uint32 sizes, then the values row-major. seqmix reads unsigned-byte arrays (type 0x08), gzip-compressed
// or not (zlib reads both). Every field is checked against the bytes present, so a truncated, oversized or foreign
// file is one clear error naming it.
#include <cstdint>
#include <string>
#include <vector>

namespace seqmix {

struct IdxArray {
  std::vector<int64_t> sizes;   // e.g. {60000, 28, 28} for images, {60000} for labels
  std::vector<uint8_t> values;  // prod(sizes) bytes, row-major
};

// Reads the IDX file at path (.gz or plain). Throws Error naming the file when it is missing, not IDX, not of
// unsigned bytes, truncated, followed by stray bytes, or larger than max_bytes of values.
IdxArray read_idx(const std::string& path, int64_t max_bytes = int64_t{1} << 32);

// The bytes of an IDX file of unsigned bytes with these sizes and values (uncompressed): what tests write.
std::string idx_bytes(const std::vector<int64_t>& sizes, const std::vector<uint8_t>& values);

}  // namespace seqmix
