#include "core/rng.h"

namespace dtlab {
namespace {

constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr std::uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u;
constexpr std::uint32_t kPhiloxW1 = 0xBB67AE85u;

inline void MulHiLo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}

}  // namespace

std::array<std::uint32_t, 4> Philox4x32(std::array<std::uint32_t, 4> ctr, std::array<std::uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    std::uint32_t hi0, lo0, hi1, lo1;
    MulHiLo(kPhiloxM0, ctr[0], hi0, lo0);
    MulHiLo(kPhiloxM1, ctr[2], hi1, lo1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    key[0] += kPhiloxW0;
    key[1] += kPhiloxW1;
  }
  return ctr;
}

std::uint32_t CounterRng::NextU32() {
  if (used_ == 4) {
    buffer_ = Philox4x32(
        {block_, static_cast<std::uint32_t>(index_), static_cast<std::uint32_t>(index_ >> 32), purpose_}, key_);
    ++block_;
    used_ = 0;
  }
  return buffer_[static_cast<std::size_t>(used_++)];
}

double CounterRng::UniformDouble() {
  const std::uint64_t hi = NextU32() >> 5;  // 27 bits
  const std::uint64_t lo = NextU32() >> 6;  // 26 bits
  return static_cast<double>((hi << 26) | lo) * 0x1p-53;
}

std::uint64_t CounterRng::UniformInt(std::uint64_t n) {
  // Lemire-style rejection on 64 random bits: unbiased for any n.
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  for (;;) {
    const std::uint64_t r = (static_cast<std::uint64_t>(NextU32()) << 32) | NextU32();
    if (r < limit) return r % n;
  }
}

}  // namespace dtlab
