#include "seqmix/io/huge_page_allocator.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <sys/mman.h>

#include <cstdint>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>

namespace seqmix {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The live huge-page mappings and their lengths. Such blocks are >= 32 MiB, so they are few and a
// lock per allocation costs nothing next to mapping them.
std::mutex& mappings_lock() {
  static std::mutex lock;
  return lock;
}
std::unordered_map<void*, size_t>& mappings() {
  static std::unordered_map<void*, size_t> live;
  return live;
}

// A 2 MiB-aligned anonymous mapping of at least `bytes`, advised for huge pages.
void* map_huge(size_t bytes) {
  const size_t length = round_up(bytes, kHugePage);
  // Over-map by one huge page, then trim both ends so the kept range starts on a 2 MiB boundary.
  const size_t padded = length + kHugePage;
  void* raw = mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TORCH_CHECK(raw != MAP_FAILED, "seqmix: out of memory: cannot map ", bytes, " bytes for a CPU tensor");
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = round_up(start, kHugePage);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + padded, kept_end = aligned + length;
  if (end > kept_end) munmap(reinterpret_cast<void*>(kept_end), end - kept_end);
  void* data = reinterpret_cast<void*>(aligned);
  madvise(data, length, MADV_HUGEPAGE);  // advice only: without THP support the pages stay 4 KiB
  std::lock_guard<std::mutex> guard(mappings_lock());
  mappings()[data] = length;
  return data;
}

// Frees a block of either kind: a mapping of ours, or (through raw_deallocate) a block of ATen's own
// allocator, whose tensors otherwise keep ATen's deleter.
void release(void* data) {
  if (data == nullptr) return;
  size_t length = 0;
  {
    std::lock_guard<std::mutex> guard(mappings_lock());
    auto it = mappings().find(data);
    if (it != mappings().end()) {
      length = it->second;
      mappings().erase(it);
    }
  }
  if (length > 0)
    munmap(data, length);
  else
    c10::free_cpu(data);
}

// Large blocks on huge pages; everything else from ATen's default allocator, untouched. (Routing small
// blocks through a deleter of ours, with its lock, made the T=1024 GLA forward 50% slower.)
class HugePageAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    if (n < kHugePageBlockBytes) return c10::GetDefaultCPUAllocator()->allocate(n);
    void* data = map_huge(n);
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  // Tensor.clone() of a storage of ours: host memory on both sides, so a plain copy.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

}  // namespace

void use_huge_page_allocator() {
  static HugePageAllocator allocator;
  c10::SetCPUAllocator(&allocator, /*priority=*/1);  // above ATen's default (0)
}

bool advised_for_huge_pages(const void* ptr) {
  std::ifstream smaps("/proc/self/smaps");
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= address && address < end;  // a mapping's first line: "begin-end perms ..."
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line.find(" hg") != std::string::npos;
    }
  }
  return false;
}

}  // namespace seqmix
