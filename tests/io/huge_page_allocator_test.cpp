// The huge-page CPU allocator: large blocks are 2 MiB-aligned mappings advised for huge pages, small
// ones come from the heap; data stays 64-byte aligned, values round-trip, and every path frees cleanly.
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <filesystem>

#include "seqmix/io/huge_page_allocator.h"

namespace seqmix {
namespace {

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(HugePageAllocator, LargeTensorsAreAdvisedMappingsAndSmallOnesAreNot) {
  use_huge_page_allocator();
  use_huge_page_allocator();  // idempotent
  const int64_t large_elements = (kHugePageBlockBytes / 4) + 12345;  // just over the threshold
  auto large = torch::arange(large_elements, torch::kFloat);
  auto small = torch::arange(1000, torch::kFloat);
  auto empty = torch::empty({0}, torch::kFloat);
  EXPECT_EQ(address(large.data_ptr()) % 64, 0u);
  EXPECT_EQ(address(small.data_ptr()) % 64, 0u);
  EXPECT_EQ(address(large.data_ptr()) % (size_t{2} << 20), 0u) << "the mapping starts on a huge page";
  EXPECT_EQ(large[large_elements - 1].item<float>(), static_cast<float>(large_elements - 1));
  EXPECT_EQ(small.sum().item<float>(), 999.0f * 1000.0f / 2.0f);
  EXPECT_EQ(empty.numel(), 0);
  if (!std::filesystem::exists("/proc/self/smaps")) GTEST_SKIP() << "no /proc/self/smaps to read the advice from";
  EXPECT_TRUE(advised_for_huge_pages(large.data_ptr()));
  EXPECT_FALSE(advised_for_huge_pages(small.data_ptr()));
}

TEST(HugePageAllocator, RawAllocationsRoundTripThroughTheRawDeleter) {
  use_huge_page_allocator();
  c10::Allocator* allocator = c10::GetCPUAllocator();
  ASSERT_NE(allocator->raw_deleter(), nullptr);
  for (size_t bytes : {size_t{1}, size_t{4096}, kHugePageBlockBytes, kHugePageBlockBytes * 2 + 7}) {
    void* p = allocator->raw_allocate(bytes);
    ASSERT_NE(p, nullptr);
    static_cast<unsigned char*>(p)[0] = 7;
    static_cast<unsigned char*>(p)[bytes - 1] = 9;
    EXPECT_EQ(static_cast<unsigned char*>(p)[bytes - 1], 9);
    allocator->raw_deallocate(p);
  }
  // Tensors grown in place and freed in any order.
  auto t = torch::zeros({16}, torch::kFloat);
  t.resize_({static_cast<int64_t>(kHugePageBlockBytes / 4) + 1});
  t.fill_(2.0f);
  EXPECT_EQ(t.sum().item<double>(), 2.0 * t.numel());
}

}  // namespace
}  // namespace seqmix
