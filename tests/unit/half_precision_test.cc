// RoundToFloat16 and RoundToBFloat16 (core/half_precision.h) are IEEE 754's
// conversions (round to nearest, ties to even) and back: against the CPU's own
// float16 conversion (F16C, part of x86-64-v3) on a dense sample of every float32
// bit pattern and on the boundaries, and bfloat16 against a reference that picks the
// nearer of the two neighbours in double arithmetic.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/half_precision.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace dtlab {
namespace {

std::vector<std::uint32_t> Sample() {
  std::vector<std::uint32_t> bits;
  for (std::uint64_t b = 0; b <= 0xffffffffu; b += 65521) bits.push_back(static_cast<std::uint32_t>(b));
  // Boundaries of both types, each with its neighbours: float16's largest finite
  // value and where rounding reaches infinity, its smallest normal and subnormal,
  // halfway cases, bfloat16's largest finite value.
  for (const float f : {65504.0f, 65519.99f, 65520.0f, 65536.0f, 6.103515625e-05f, 5.9604644775390625e-08f,
                        2.98023223876953125e-08f, 8.940696716308594e-08f, 1.0f + 1.0f / 2048.0f, 1.0f + 3.0f / 2048.0f,
                        3.3895313892515355e38f, std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                        std::numeric_limits<float>::denorm_min(), 0.0f, std::numeric_limits<float>::infinity()})
    for (const float s : {f, -f})
      for (int d = -3; d <= 3; ++d) bits.push_back(std::bit_cast<std::uint32_t>(s) + static_cast<std::uint32_t>(d));
  return bits;
}

bool SameOrBothNan(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

#if defined(__F16C__)
TEST(HalfPrecision, Float16IsTheHardwareConversion) {
  std::size_t checked = 0;
  for (const std::uint32_t b : Sample()) {
    const float x = std::bit_cast<float>(b);
    const float want = _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    ASSERT_TRUE(SameOrBothNan(RoundToFloat16(x), want))
        << std::hex << b << ": " << RoundToFloat16(x) << " want " << want;
    ++checked;
  }
  EXPECT_GT(checked, 65000u);
}
#endif

// The nearer of the two bfloat16 values around x (ties: the even one), in double.
float BFloat16Reference(float x) {
  if (std::isnan(x)) return x;
  const std::uint32_t b = std::bit_cast<std::uint32_t>(x);
  const float down = std::bit_cast<float>(b & 0xffff0000u);
  const float up = std::bit_cast<float>((b & 0xffff0000u) + 0x10000u);  // may be inf: the carry
  if (std::isinf(x) || down == x) return down;
  const double dd = std::abs(static_cast<double>(x) - down);
  // Beyond the largest finite bfloat16, "up" is infinity: compare with its would-be value.
  const double up_value = std::isinf(up) ? std::ldexp(1.0, 128) * (x < 0 ? -1 : 1) : static_cast<double>(up);
  const double du = std::abs(up_value - static_cast<double>(x));
  if (dd < du) return down;
  if (du < dd) return up;
  return ((b >> 16) & 1u) == 0 ? down : up;
}

TEST(HalfPrecision, BFloat16RoundsToNearestEven) {
  for (const std::uint32_t b : Sample()) {
    const float x = std::bit_cast<float>(b);
    ASSERT_TRUE(SameOrBothNan(RoundToBFloat16(x), BFloat16Reference(x)))
        << std::hex << b << ": " << RoundToBFloat16(x) << " want " << BFloat16Reference(x);
  }
}

TEST(HalfPrecision, KnownValues) {
  EXPECT_EQ(RoundToFloat16(65504.0f), 65504.0f);
  EXPECT_EQ(RoundToFloat16(65519.0f), 65504.0f);
  EXPECT_EQ(RoundToFloat16(65520.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(RoundToFloat16(-1e6f), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(RoundToFloat16(1.0f + 1.0f / 2048.0f), 1.0f);                   // a tie: to even
  EXPECT_EQ(RoundToFloat16(1.0f + 3.0f / 2048.0f), 1.0f + 2.0f / 1024.0f);  // a tie: to even, up
  EXPECT_EQ(RoundToFloat16(std::ldexp(1.0f, -25)), 0.0f);                   // half the smallest subnormal: to 0
  EXPECT_EQ(RoundToFloat16(std::ldexp(3.0f, -26)), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::signbit(RoundToFloat16(-1e-30f)));
  EXPECT_EQ(RoundToBFloat16(1.00390625f), 1.0f);  // 1 + 2^-8: a tie, to even
  EXPECT_EQ(RoundToBFloat16(std::numeric_limits<float>::max()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(RoundToBFloat16(std::numeric_limits<float>::quiet_NaN())));
  std::vector<float> v{1.0f + 1.0f / 1024.0f, 70000.0f};
  RoundToComputeType(v, ComputeType::kFloat32);
  EXPECT_EQ(v[1], 70000.0f);
  RoundToComputeType(v, ComputeType::kFloat16);
  EXPECT_EQ(v[0], 1.0f + 1.0f / 1024.0f);
  EXPECT_EQ(v[1], std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace dtlab
