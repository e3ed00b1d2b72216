// An allocator whose large blocks the kernel may back with transparent huge pages
// (Linux, madvise mode): 2 MiB aligned, rounded up to whole huge pages, and
// advised MADV_HUGEPAGE. For buffers that another process reads by MPI's single
// copy (the kernel pins each of their pages: a 2 MiB page is one pin where 4 KiB
// pages were 512) and that are swept end to end. Smaller blocks, and systems
// without the advice, get ordinary memory; the contents never differ.
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
    void* p = ::operator new(Rounded(bytes), std::align_val_t{kHugePage});
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, Rounded(bytes), MADV_HUGEPAGE);  // advice: where refused, ordinary pages
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) return std::allocator<T>().deallocate(p, n);
    ::operator delete(p, Rounded(bytes), std::align_val_t{kHugePage});
  }
  friend bool operator==(const HugePageAllocator&, const HugePageAllocator&) { return true; }

 private:
  static std::size_t Rounded(std::size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }
};

template <typename T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace dtlab
