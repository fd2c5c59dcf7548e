#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "seqmix/io/atomic_file.h"
#include "seqmix/io/error.h"
#include "seqmix/io/safetensors.h"

namespace seqmix {
namespace {

std::string temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("seqmix-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

TEST(Safetensors, RoundTripIsExactForEveryDtype) {
  std::vector<std::pair<std::string, at::Tensor>> tensors = {
      {"f32", torch::randn({3, 4})},
      {"f64", torch::randn({2}, torch::kDouble)},
      {"bf16", torch::randn({5}).to(torch::kBFloat16)},
      {"i64", torch::arange(7, torch::kLong)},
      {"u8", torch::randint(0, 255, {9}, torch::kByte)},
      {"bool", torch::rand({4}) > 0.5},
      {"scalar", torch::tensor(3.5)},
      {"empty", torch::zeros({0, 3})},
      {"noncontig", torch::randn({4, 6}).t()}};
  const std::string path = temp_path("roundtrip.safetensors");
  write_safetensors(path, tensors, {{"format", "test"}});
  const SafetensorsFile f = read_safetensors(path);
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(f.tensors[i].first, tensors[i].first);  // file order kept
    EXPECT_TRUE(torch::equal(f.tensors[i].second, tensors[i].second)) << tensors[i].first;
    EXPECT_EQ(f.tensors[i].second.scalar_type(), tensors[i].second.scalar_type());
  }
  EXPECT_EQ(f.metadata.at("format"), "test");
  // Header length is a multiple of 8 so the data is aligned.
  const std::string bytes = read_file(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  EXPECT_EQ(n % 8, 0u);
}

TEST(Safetensors, ReadsAHandWrittenFile) {
  // {"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}} followed by 1, 2 as little-endian int32.
  const std::string header = R"({"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})";
  std::string bytes(8, '\0');
  bytes[0] = static_cast<char>(header.size());
  bytes += header;
  bytes += std::string("\x01\x00\x00\x00\x02\x00\x00\x00", 8);
  const SafetensorsFile f = parse_safetensors(bytes, "memory");
  EXPECT_TRUE(torch::equal(f.at("a"), torch::tensor({1, 2}, torch::kInt)));
}

std::string message_of(const std::string& bytes) {
  try {
    parse_safetensors(bytes, "x");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, CorruptOrTruncatedFilesAreClearErrors) {
  const std::string good = serialize_safetensors({{"w", torch::randn({4, 4})}});
  EXPECT_NE(message_of(good.substr(0, 5)).find("truncated"), std::string::npos);
  EXPECT_NE(message_of(good.substr(0, good.size() - 3)).find("truncated or corrupt"), std::string::npos);
  std::string bad_json = good;
  bad_json[9] = '#';
  EXPECT_NE(message_of(bad_json).find("malformed JSON"), std::string::npos);
  std::string huge = good;
  huge[7] = '\x7f';
  EXPECT_NE(message_of(huge).find("truncated"), std::string::npos);
  auto with_header = [](const std::string& h) {
    std::string b(8, '\0');
    b[0] = static_cast<char>(h.size());
    return b + h + std::string(16, '\0');
  };
  EXPECT_NE(message_of(with_header(R"({"a":{"dtype":"X9","shape":[1],"data_offsets":[0,4]}})")).find("dtype"), std::string::npos);
  EXPECT_NE(message_of(with_header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,4]}})")).find("bytes for 3"), std::string::npos);
  EXPECT_NE(message_of(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})")).find("overlap"),
            std::string::npos);
  EXPECT_NE(message_of(with_header(R"([1,2])")).find("not a JSON object"), std::string::npos);
  EXPECT_THROW(read_safetensors(temp_path("does-not-exist")), Error);
}

TEST(AtomicFile, ReplacesWholeAndLeavesNoTemporaries) {
  const std::string path = temp_path("atomic.txt");
  write_file_atomically(path, "first");
  write_file_atomically(path, "second");
  EXPECT_EQ(read_file(path), "second");
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  EXPECT_THROW(write_file_atomically("/nonexistent-dir/x", "y"), Error);
}

}  // namespace
}  // namespace seqmix
