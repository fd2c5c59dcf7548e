#include "seqmix/io/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "seqmix/io/error.h"

namespace seqmix {
namespace {

// A gzip (or plain) stream, read in full chunks: fewer bytes than asked means the file ended.
class GzipReader {
 public:
  explicit GzipReader(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (!file_) throw Error("IDX file " + path + " cannot be opened (missing or unreadable)");
  }
  ~GzipReader() {
    if (file_) gzclose(file_);
  }
  GzipReader(const GzipReader&) = delete;
  GzipReader& operator=(const GzipReader&) = delete;

  // Reads up to n bytes into out; returns how many were read. A damaged gzip stream is an Error.
  size_t read(void* out, size_t n) {
    size_t done = 0;
    auto* p = static_cast<unsigned char*>(out);
    while (done < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
      const int got = gzread(file_, p + done, chunk);
      if (got < 0) {
        int code = 0;
        const char* message = gzerror(file_, &code);
        throw Error("IDX file " + path_ + " is corrupt (" + std::string(message ? message : "gzip error") + ")");
      }
      if (got == 0) break;
      done += static_cast<size_t>(got);
    }
    return done;
  }

 private:
  std::string path_;
  gzFile file_;
};

uint32_t big_endian(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

IdxArray read_idx(const std::string& path, int64_t max_bytes) {
  GzipReader in(path);
  unsigned char magic[4];
  if (in.read(magic, 4) != 4) throw Error("IDX file " + path + " is truncated: it ends before its 4-byte magic number");
  if (magic[0] != 0 || magic[1] != 0)
    throw Error("IDX file " + path + " is not an IDX file: its magic number does not start with two zero bytes");
  if (magic[2] != 0x08) {
    char type[8];
    std::snprintf(type, sizeof type, "0x%02x", magic[2]);
    throw Error("IDX file " + path + " holds values of type " + type + "; seqmix reads unsigned bytes (type 0x08)");
  }
  const int rank = magic[3];
  if (rank < 1 || rank > 4) throw Error("IDX file " + path + " has rank " + std::to_string(rank) + "; expected 1 to 4");
  IdxArray a;
  double count = 1;
  for (int d = 0; d < rank; ++d) {
    unsigned char size[4];
    if (in.read(size, 4) != 4) throw Error("IDX file " + path + " is truncated: it ends inside its header");
    a.sizes.push_back(static_cast<int64_t>(big_endian(size)));
    count *= static_cast<double>(a.sizes.back());
  }
  if (count > static_cast<double>(max_bytes)) {
    char declared[64];
    std::snprintf(declared, sizeof declared, "%.0f", count);  // may exceed any integer type
    throw Error("IDX file " + path + " declares " + declared + " values, more than the " + std::to_string(max_bytes) +
                " seqmix reads");
  }
  a.values.resize(static_cast<size_t>(count));
  const size_t got = in.read(a.values.data(), a.values.size());
  if (got != a.values.size())
    throw Error("IDX file " + path + " is truncated: its header declares " + std::to_string(a.values.size()) +
                " values and it holds " + std::to_string(got));
  unsigned char extra;
  if (in.read(&extra, 1) != 0)
    throw Error("IDX file " + path + " has bytes after the " + std::to_string(a.values.size()) + " values its header declares");
  return a;
}

std::string idx_bytes(const std::vector<int64_t>& sizes, const std::vector<uint8_t>& values) {
  std::string out = {0, 0, 0x08, static_cast<char>(sizes.size())};
  for (int64_t s : sizes)
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((static_cast<uint64_t>(s) >> shift) & 0xFF));
  out.append(reinterpret_cast<const char*>(values.data()), values.size());
  return out;
}

}  // namespace seqmix
