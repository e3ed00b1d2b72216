// An allocator whose large blocks the kernel may back with transparent huge pages
// (Linux, madvise mode): 2 MiB aligned, their whole huge pages advised
// MADV_HUGEPAGE, the rest (a tail under 2 MiB) left to ordinary pages, so that a
// block takes no more memory than its size. For buffers that another process
// reads by MPI's single copy (the kernel pins each of their pages: a 2 MiB page is
// one pin where 4 KiB pages were 512) and that are swept end to end. Smaller
// blocks, and systems without the advice, get ordinary memory; the contents never
// differ.
#pragma once

#include <cstddef>
#include <new>
#include <vector>
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace dtlab {

template <typename T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;

  HugePageAllocator() = default;
  template <typename U>
  explicit HugePageAllocator(const HugePageAllocator<U>&) {}

  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) return std::allocator<T>().allocate(n);
    void* p = ::operator new (bytes, std::align_val_t{kHugePage});
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice: where refused, ordinary pages
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) return std::allocator<T>().deallocate(p, n);
    ::operator delete (p, std::align_val_t{kHugePage});
  }
  friend bool operator==(const HugePageAllocator&, const HugePageAllocator&) { return true; }
};

template <typename T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace dtlab
