#pragma once
// Large CPU tensors on transparent huge pages.
//
// glibc serves every block of 32 MiB or more with a fresh mmap and returns it on free, so a tensor that
// size costs one page fault per 4 KiB each time it is allocated (a [1,16384,8,64] fp32 tensor: 8,192
// faults). With this allocator installed, such blocks are mapped 2 MiB-aligned and advised
// MADV_HUGEPAGE, so the kernel backs them with 2 MiB pages: 512x fewer faults, the same memory.
// Smaller blocks come from ATen's own allocator as before (malloc reuses them from its heap). The `seqmix` command installs
// it at start; C++ programs may call it themselves. (Programs that do not, e.g. Python, get the same
// effect from glibc >= 2.35 with GLIBC_TUNABLES=glibc.malloc.hugetlb=1.)
#include <cstddef>

namespace seqmix {

// Blocks at least this large are mapped on huge pages.
constexpr size_t kHugePageBlockBytes = size_t{32} << 20;

// Makes the allocator ATen's CPU allocator from now on (tensors allocated earlier keep their own
// deleter and are freed correctly). Idempotent.
void use_huge_page_allocator();

// True when the memory at ptr lies in a mapping advised for huge pages (read from /proc/self/smaps;
// false when that file cannot be read). For tests and diagnostics.
bool advised_for_huge_pages(const void* ptr);

}  // namespace seqmix
