// IDX files: plain and gzip-compressed files read back exactly, and every kind of damage is one clear error naming
// the file.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "seqmix/io/error.h"
#include "seqmix/io/idx.h"
#include "support/error_of.h"

namespace seqmix {
namespace {
namespace fs = std::filesystem;
using seqmix::testing::error_of;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("seqmix-idx-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

void write_plain(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

void write_gzip(const fs::path& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(f);
}

TEST(Idx, PlainAndGzipFilesReadBackExactly) {
  std::vector<uint8_t> values(2 * 3 * 5);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint8_t>(7 * i + 3);
  const std::string bytes = idx_bytes({2, 3, 5}, values);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x00\x00\x08\x03\x00\x00\x00\x02", 8));  // magic, then big-endian 2
  write_plain(scratch("a.idx"), bytes);
  write_gzip(scratch("a.idx.gz"), bytes);
  for (const char* name : {"a.idx", "a.idx.gz"}) {
    const IdxArray a = read_idx(scratch(name).string());
    EXPECT_EQ(a.sizes, (std::vector<int64_t>{2, 3, 5})) << name;
    EXPECT_EQ(a.values, values) << name;
  }
}

TEST(Idx, DamagedFilesAreOneLineErrorsNamingTheFile) {
  const std::string good = idx_bytes({4, 2}, std::vector<uint8_t>(8, 9));
  auto error_for = [](const std::string& bytes, bool gzip = false, int64_t max_bytes = int64_t{1} << 32) {
    const fs::path path = scratch(gzip ? "bad.idx.gz" : "bad.idx");
    if (gzip)
      write_gzip(path, bytes);
    else
      write_plain(path, bytes);
    const std::string m = error_of([&] { read_idx(path.string(), max_bytes); });
    EXPECT_NE(m.find(path.string()), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    return m;
  };
  EXPECT_NE(error_of([] { read_idx("/nonexistent/train-images-idx3-ubyte.gz"); }).find("cannot be opened"), std::string::npos);
  EXPECT_NE(error_for("\x00\x00").find("ends before its 4-byte magic number"), std::string::npos);
  EXPECT_NE(error_for("PK\x03\x04 a zip file").find("is not an IDX file"), std::string::npos);
  EXPECT_NE(error_for(std::string("\x00\x00\x0D\x01\x00\x00\x00\x01....", 12)).find("type 0x0d; seqmix reads unsigned bytes"),
            std::string::npos);
  EXPECT_NE(error_for(std::string("\x00\x00\x08\x00", 4)).find("rank 0"), std::string::npos);
  EXPECT_NE(error_for(good.substr(0, 9)).find("ends inside its header"), std::string::npos);
  EXPECT_NE(error_for(good.substr(0, good.size() - 3)).find("declares 8 values and it holds 5"), std::string::npos);
  EXPECT_NE(error_for(good.substr(0, good.size() - 3), true).find("declares 8 values and it holds 5"), std::string::npos);
  EXPECT_NE(error_for(good + "x").find("has bytes after the 8 values"), std::string::npos);
  EXPECT_NE(error_for(good, false, 7).find("declares 8 values, more than the 7 seqmix reads"), std::string::npos);
  // A gzip stream cut in the middle.
  const fs::path whole = scratch("whole.gz");
  write_gzip(whole, idx_bytes({100, 100}, std::vector<uint8_t>(10000, 1)));
  std::ifstream in(whole, std::ios::binary);
  const std::string compressed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string m = error_for(compressed.substr(0, compressed.size() / 2));
  EXPECT_TRUE(m.find("is truncated") != std::string::npos || m.find("is corrupt") != std::string::npos) << m;
}

}  // namespace
}  // namespace seqmix
