// The hot half of exact sums (core/exact_sum.h has the word layout and the rest):
// the constants, adding a float or an exact float x float product to an
// accumulator, and carrying. Plain integer code that compiles for the CPU and, in
// CUDA code, for the GPU (DTLAB_HOST_DEVICE), so a GPU kernel adds its terms to the
// very same words the CPU would (docs/gpu.md).
//
// Thread safety: functions on distinct word arrays may run concurrently.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace dtlab {

__extension__ typedef __int128 ExactInt128;  // GCC and Clang; __extension__ keeps -Wpedantic quiet

inline constexpr int kExactDigitWords = 18;
inline constexpr int kExactWords = kExactDigitWords + 1;
inline constexpr int kExactLsbExponent = -298;  // 2^-298: the smallest float32 x float32 product
inline constexpr std::int64_t kExactNanUnit = std::int64_t{1} << 42;
inline constexpr std::int64_t kExactPosInfUnit = std::int64_t{1} << 21;
inline constexpr std::int64_t kExactNegInfUnit = 1;

// ---------------------------------------------------------------------------
// Hot path, inline. Exact mode calls ExactAddFloat and ExactAddProduct millions of
// times per training step from other translation units, and dtlab builds without
// LTO: an out-of-line call would cost about as much as the add itself
// (bench/exact_sum_bench.cc). Both decode the float bits directly instead of going
// through double, are branch-free apart from the tests for zero and non-finite
// terms, and touch 2 (float) or 3 (product) adjacent words. Zero terms return
// early: free when zeros come in runs or dominate (ReLU, image borders); only
// zeros placed at random half of the time mispredict enough to cost more than
// adding the zero would (about 2x, in the many-accumulator bench).
namespace exact_internal {

// Adds +digit or -digit to `word`: sign_mask is 0 or -1 (all ones), and
// (digit ^ -1) - (-1) = -digit.
inline DTLAB_HOST_DEVICE void AddSignedDigit(std::int64_t& word, std::uint64_t digit, std::int64_t sign_mask) {
  word += (static_cast<std::int64_t>(digit) ^ sign_mask) - sign_mask;
}

// The integer significand of a finite float (24 bits with the implicit one; a
// subnormal has none) and the exponent of its lsb offset so that 1 is 2^-149:
// x = significand * 2^(lsb_exponent - 150). A subnormal shares lsb_exponent 1 with
// the smallest normals, which is what makes the decoding branch-free.
struct DecodedFloat {
  std::uint64_t significand;
  std::uint32_t lsb_exponent;
};

inline DTLAB_HOST_DEVICE DecodedFloat DecodeFiniteFloat(std::uint32_t bits) {
  const std::uint32_t biased_exponent = (bits >> 23) & 0xff;
  const std::uint32_t is_normal = biased_exponent != 0;
  return {(bits & 0x7fffffu) | (is_normal << 23), biased_exponent + 1 - is_normal};
}

}  // namespace exact_internal

/// words += a non-finite term given as the bits of a double (NaN, +inf or -inf):
/// the count in the last word (see core/exact_sum.h).
inline DTLAB_HOST_DEVICE void ExactAddNonFinite(std::int64_t* words, std::uint64_t double_bits) {
  const bool is_nan = (double_bits & ((std::uint64_t{1} << 52) - 1)) != 0;
  words[kExactDigitWords] += is_nan ? kExactNanUnit : (double_bits >> 63) ? kExactNegInfUnit : kExactPosInfUnit;
}

/// words += x. REQUIRES: `words` has kExactWords entries. Returns the first of the
/// two digit words it added to, or -1 if it added to none (x zero or non-finite).
inline DTLAB_HOST_DEVICE int ExactAddFloat(std::int64_t* words, float x) {
  const std::uint32_t bits = FloatToBits(x);
  // One test for the rare cases: |bits| - 1 wraps around for +-0 and is at least
  // 0x7f7fffff exactly for the infinities and NaNs (exponent field 0xff).
  if ((bits & 0x7fffffffu) - 1 >= 0x7f7fffffu) [[unlikely]] {
    if ((bits & 0x7fffffffu) != 0) ExactAddNonFinite(words, DoubleToBits(static_cast<double>(x)));
    return -1;
  }
  const auto [significand, lsb_exponent] = exact_internal::DecodeFiniteFloat(bits);
  // The significand's lsb, 2^(lsb_exponent - 150), in units of 2^kExactLsbExponent:
  // bit `position` of the accumulator, from 149 (2^-149) to 402 (2^104).
  const std::uint32_t position = lsb_exponent + static_cast<std::uint32_t>(-150 - kExactLsbExponent);
  // +-significand * 2^(position % 32) is below 2^55 in magnitude: a low digit in
  // [0, 2^32) for the first word and the signed rest (|rest| <= 2^23) for the next.
  const std::int64_t sign_mask = -static_cast<std::int64_t>(bits >> 31);
  const std::int64_t value = (static_cast<std::int64_t>(significand << (position & 31)) ^ sign_mask) - sign_mask;
  std::int64_t* word = words + (position >> 5);
  word[0] += value & 0xffffffff;
  word[1] += value >> 32;  // arithmetic: floor(value / 2^32)
  return static_cast<int>(position >> 5);
}

/// words += a * b, the exact product (as computed in double, where it is exact:
/// non-finite operands give the double product's NaN or infinity, inf * 0 = NaN).
inline DTLAB_HOST_DEVICE void ExactAddProduct(std::int64_t* words, float a, float b) {
  const std::uint32_t a_bits = FloatToBits(a);
  const std::uint32_t b_bits = FloatToBits(b);
  if (((a_bits & 0x7f800000u) == 0x7f800000u) | ((b_bits & 0x7f800000u) == 0x7f800000u)) [[unlikely]] {
    ExactAddNonFinite(words, DoubleToBits(static_cast<double>(a) * static_cast<double>(b)));
    return;
  }
  const auto [a_significand, a_lsb_exponent] = exact_internal::DecodeFiniteFloat(a_bits);
  const auto [b_significand, b_lsb_exponent] = exact_internal::DecodeFiniteFloat(b_bits);
  const std::uint64_t product = a_significand * b_significand;  // < 2^48, exact
  if (product == 0) return;
  // lsb 2^(a_lsb_exponent - 150 + b_lsb_exponent - 150) is accumulator bit
  // 0 (2^-298) .. 506 (2^208); the 48-bit product shifted within its first word
  // spans three words, the highest at most word 17.
  const std::uint32_t position = a_lsb_exponent + b_lsb_exponent - static_cast<std::uint32_t>(300 + kExactLsbExponent);
  const std::uint32_t shift = position & 31;
  const std::uint64_t low = product << shift;                  // bits 0..63 of product * 2^shift
  const std::uint64_t high = (product >> 32) >> (32 - shift);  // bits 64..79 (shift < 32)
  const std::int64_t sign_mask = -static_cast<std::int64_t>((a_bits ^ b_bits) >> 31);
  std::int64_t* word = words + (position >> 5);
  exact_internal::AddSignedDigit(word[0], low & 0xffffffffu, sign_mask);
  exact_internal::AddSignedDigit(word[1], low >> 32, sign_mask);
  exact_internal::AddSignedDigit(word[2], high, sign_mask);
}

/// Propagates carries (ExactNormalize, for the CPU and the GPU): each digit word
/// keeps its digit in [0, 2^32) and passes the rest, floor(word / 2^32) (an
/// arithmetic shift), up; the top digit word keeps what reaches it, signed. The
/// result is unique for a value, so equal sums get equal words. Also returns a mask
/// of the digits below the top one that are nonzero (bit i for digit i), which
/// rounding uses; callers that drop it do not pay for it once this is inlined.
/// Unrolled: the carry chain is the whole cost, and without the loop counter and
/// variable shifts it runs about 20% faster (bench: ExactToFloats).
inline DTLAB_HOST_DEVICE std::uint32_t ExactCarry(std::int64_t* words) {
  std::int64_t carry = 0;
  std::uint32_t nonzero = 0;
#if defined(__CUDACC__)
#pragma unroll
#else
#pragma GCC unroll 17
#endif
  for (int i = 0; i < kExactDigitWords - 1; ++i) {
    const std::int64_t word = words[i] + carry;
    carry = word >> 32;
    words[i] = word & 0xffffffff;
    nonzero |= std::uint32_t{words[i] != 0} << i;
  }
  words[kExactDigitWords - 1] += carry;
  return nonzero;
}

}  // namespace dtlab
