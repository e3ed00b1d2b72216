// HugePageAllocator (core/huge_pages.h): large blocks 2 MiB aligned, small ones
// ordinary, and a vector's contents kept through growth either way.
#include "core/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>

namespace dtlab {
namespace {

TEST(HugePages, LargeBlocksAreAlignedToAHugePageAndKeepTheirContents) {
  constexpr std::size_t kHuge = HugePageAllocator<std::int64_t>::kHugePage;
  HugePageVector<std::int64_t> v(100);  // 800 bytes: ordinary memory
  std::iota(v.begin(), v.end(), 0);
  v.resize(3 * kHuge / sizeof(std::int64_t) + 5);  // past 6 MiB: huge pages advised
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v.data()) % kHuge, 0u);
  for (std::size_t i = 0; i < 100; ++i) ASSERT_EQ(v[i], static_cast<std::int64_t>(i));
  for (std::size_t i = 100; i < v.size(); ++i) ASSERT_EQ(v[i], 0);
  v.back() = -1;
  HugePageVector<std::int64_t> copy = v;
  EXPECT_EQ(copy, v);
  v.resize(10);
  v.shrink_to_fit();
  EXPECT_EQ(v[9], 9);
}

}  // namespace
}  // namespace dtlab
