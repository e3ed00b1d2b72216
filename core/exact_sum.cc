// Exact sums: the cold half (ExactAddFloat and ExactAddProduct are inline in the
// header). See core/exact_sum.h for the word layout and docs/exact.md for why.
#include "core/exact_sum.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace dtlab {
namespace {

__extension__ typedef unsigned __int128 Uint128;

constexpr int kTopDigit = kExactDigitWords - 1;
constexpr int kSpecialWord = kExactDigitWords;
constexpr std::int64_t kCountMask = kExactPosInfUnit - 1;  // one 21-bit count field

// The value of the accumulator's non-finite terms alone, if any: NaN when a NaN or
// both infinities were added, else the one infinity; 0 when all terms were finite.
// The counts are read as fields (not tested against the units) so that a count
// that grew into a neighbouring field still reads as "some".
template <typename Float>
Float NonFiniteValue(std::int64_t special) {
  const std::int64_t nans = special >> 42;
  const std::int64_t pos_infs = (special >> 21) & kCountMask;
  const std::int64_t neg_infs = special & kCountMask;
  if (nans != 0 || (pos_infs != 0 && neg_infs != 0)) return std::numeric_limits<Float>::quiet_NaN();
  if (pos_infs != 0) return std::numeric_limits<Float>::infinity();
  return -std::numeric_limits<Float>::infinity();
}

// Nonzero unless every digit below the top one is in [0, 2^32): normalized words.
// An OR of shifted words, without a chain of dependent additions (it vectorizes).
std::uint64_t DigitsOutOfRange(const std::int64_t* words) {
  std::uint64_t out_of_range = 0;
  for (int i = 0; i < kTopDigit; ++i) out_of_range |= static_cast<std::uint64_t>(words[i]) >> 32;
  return out_of_range;
}

// 2^exponent as a double, for exponents in the normal range [-1022, 1023].
double TwoToThe(int exponent) { return std::bit_cast<double>(static_cast<std::uint64_t>(exponent + 1023) << 52); }

// Correct rounding of the exact value to a binary format with `precision` bits of
// significand whose smallest subnormal is 2^min_exponent (float: 24, -149; double:
// 53, -1074), to nearest with ties to even. Overflow and subnormal results come out
// of the final conversion, which is exact or overflows exactly when IEEE 754 says
// (see below).
template <typename Float, int precision, int min_exponent>
Float RoundExact(const std::int64_t* words) {
  if (words[kSpecialWord] != 0) [[unlikely]] {
    return NonFiniteValue<Float>(words[kSpecialWord]);
  }

  // The magnitude as 32-bit limbs (held in int64), least significant first: the
  // normalized digits, with the top word (which may exceed 2^32) split into limbs
  // 17 and 18, and two zero limbs that pad the reads of `window` below. Bit i of
  // `nonzero_limbs` says whether limb i is nonzero.
  std::int64_t limbs[kExactDigitWords + 3];
  std::copy(words, words + kExactDigitWords, limbs);
  std::uint32_t nonzero_limbs = ExactCarry(limbs);
  // Negating every word negates the value, and normalizing again brings the top
  // word back to >= 0 (the same loop, rather than a multiword complement with its
  // own borrow chain). A branch: it is cheaper than always normalizing twice.
  const bool negative = limbs[kTopDigit] < 0;
  if (negative) {
    for (int i = 0; i < kExactDigitWords; ++i) limbs[i] = -limbs[i];
    nonzero_limbs = ExactCarry(limbs);
  }
  const std::int64_t top = limbs[kTopDigit];
  limbs[kTopDigit] = top & 0xffffffff;
  limbs[kTopDigit + 1] = top >> 32;
  limbs[kTopDigit + 2] = limbs[kTopDigit + 3] = 0;
  nonzero_limbs |= std::uint32_t{limbs[kTopDigit] != 0} << kTopDigit;
  nonzero_limbs |= std::uint32_t{limbs[kTopDigit + 1] != 0} << (kTopDigit + 1);
  if (nonzero_limbs == 0) return Float{0};  // exact zero: +0

  // Bit positions count units of 2^kExactLsbExponent. The result's lsb is
  // `precision` bits below the top bit, or the subnormal quantum if that is higher;
  // a result lsb at or below bit 0 means every bit of the value fits: exact.
  const int top_limb = 31 - std::countl_zero(nonzero_limbs);
  const int top_bit = 32 * top_limb + 31 - std::countl_zero(static_cast<std::uint32_t>(limbs[top_limb]));
  const int lsb = std::max({top_bit - (precision - 1), min_exponent - kExactLsbExponent, 0});
  // 96 bits from limb lsb/32 on, shifted to start at bit `lsb`: at least 65 bits,
  // and the significand has at most `precision` <= 53 of them.
  const int lsb_limb = lsb >> 5;
  const Uint128 window = static_cast<std::uint64_t>(limbs[lsb_limb]) |
                         static_cast<Uint128>(static_cast<std::uint64_t>(limbs[lsb_limb + 1])) << 32 |
                         static_cast<Uint128>(static_cast<std::uint64_t>(limbs[lsb_limb + 2])) << 64;
  std::uint64_t significand = static_cast<std::uint64_t>(window >> (lsb & 31));
  if (lsb > 0) {
    const int round_limb = (lsb - 1) >> 5;
    const int round_shift = (lsb - 1) & 31;
    const auto round_limb_bits = static_cast<std::uint64_t>(limbs[round_limb]);
    const std::uint64_t round_bit = (round_limb_bits >> round_shift) & 1;
    const bool sticky = (round_limb_bits & ((std::uint64_t{1} << round_shift) - 1)) != 0 ||
                        (nonzero_limbs & ((std::uint32_t{1} << round_limb) - 1)) != 0;
    // To nearest, ties to even. A carry out of the top (significand = 2^precision)
    // is fine: the value below is still exact, with one more power of two.
    significand += round_bit & (std::uint64_t{sticky} | significand);
  }
  // significand * 2^(lsb + kExactLsbExponent) is exact in double: significand <=
  // 2^53 and the exponent is within [-298, 310]. For float, converting that
  // double is exact when the float exists (a normal one has <= 24 bits here; a
  // subnormal one is a multiple of 2^-149) and gives +inf when the rounded value
  // is 2^128 or more, which is IEEE 754's overflow rule (rounding with unbounded
  // exponent first).
  const double magnitude = static_cast<double>(significand) * TwoToThe(lsb + kExactLsbExponent);
  const auto result = static_cast<Float>(magnitude);
  return negative ? -result : result;
}

}  // namespace

void ExactAddDouble(std::int64_t* words, double x) {
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
  const int biased_exponent = static_cast<int>((bits >> 52) & 0x7ff);
  if (biased_exponent == 0x7ff) {
    ExactAddNonFinite(words, bits);
    return;
  }
  if ((bits << 1) == 0) return;  // +-0
  // A subnormal double is below 2^-1022, so it cannot be a multiple of 2^-298.
  assert(biased_exponent != 0 && "ExactAddDouble: not a multiple of 2^-298");
  assert(biased_exponent - 1023 < 300 && "ExactAddDouble: |x| >= 2^300");
  std::uint64_t significand = (bits & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1} << 52);
  // x = significand * 2^(biased_exponent - 1075); its lsb as an accumulator bit.
  int position = biased_exponent - 1075 - kExactLsbExponent;
  if (position < 0) {
    // The bits below 2^-298 must be zero (the multiple condition); drop them.
    const int drop = -position;
    assert(drop < 64 && (significand & ((std::uint64_t{1} << drop) - 1)) == 0 &&
           "ExactAddDouble: not a multiple of 2^-298");
    significand = drop < 64 ? significand >> drop : 0;
    position = 0;
  }
  const std::int64_t sign_mask = -static_cast<std::int64_t>(bits >> 63);
  Uint128 shifted = static_cast<Uint128>(significand) << (position & 31);  // < 2^85
  // One 32-bit digit per word, except that the top digit word takes all that is
  // left (< 2^54 for |x| < 2^300; see the header on the top word's room).
  for (int word = position >> 5; shifted != 0; ++word, shifted >>= 32) {
    if (word == kTopDigit) {
      exact_internal::AddSignedDigit(words[word], static_cast<std::uint64_t>(shifted), sign_mask);
      break;
    }
    exact_internal::AddSignedDigit(words[word], static_cast<std::uint64_t>(shifted) & 0xffffffffu, sign_mask);
  }
}

void ExactMerge(std::int64_t* dst, const std::int64_t* src) {
  for (int i = 0; i < kExactWords; ++i) dst[i] += src[i];
}

void ExactAddInt128(std::int64_t* words, ExactInt128 value, int position) {
  if (value == 0) return;
  const std::int64_t sign_mask = value < 0 ? -1 : 0;
  Uint128 magnitude = value < 0 ? -static_cast<Uint128>(value) : static_cast<Uint128>(value);
  if (position < 0) {
    assert((magnitude & ((Uint128{1} << -position) - 1)) == 0);
    magnitude >>= -position;
    position = 0;
  }
  // 32-bit digits of magnitude * 2^(position % 32), added at word position / 32 on.
  // Digits past the top digit word (zero unless the value is near the top of the
  // range) fold into it: that word is signed and holds more than 32 bits.
  const int shift = position & 31;
  const int first = position >> 5;
  const Uint128 low = magnitude << shift;  // bits 0..127
  const std::uint64_t high = shift == 0 ? 0 : static_cast<std::uint64_t>(magnitude >> 96) >> (32 - shift);  // 128..159
  for (int d = 0; d < 5; ++d) {
    const std::uint64_t digit = d < 4 ? static_cast<std::uint64_t>(low >> (32 * d)) & 0xffffffffu : high;
    if (digit == 0) continue;
    const std::int64_t signed_digit = (static_cast<std::int64_t>(digit) ^ sign_mask) - sign_mask;
    const int index = first + d;
    if (index <= kTopDigit)
      words[index] += signed_digit;
    else {
      assert(index == kTopDigit + 1);  // beyond that the value is out of range
      words[kTopDigit] += signed_digit * (std::int64_t{1} << 32);
    }
  }
}

void ExactSetInt128(std::int64_t* words, ExactInt128 value, int position) {
  std::fill_n(words, kExactWords, 0);
  ExactAddInt128(words, value, position);
  // The value's digits (at most five, from `first`) carried; above them every digit
  // is 0 (a carry of 0) or all ones up to the top digit's -1 (a borrow of -1).
  const int first = std::max(position, 0) >> 5;
  std::int64_t carry = 0;
  for (int i = first; i < kTopDigit; ++i) {
    const std::int64_t word = words[i] + carry;
    carry = word >> 32;
    words[i] = word & 0xffffffff;
    if (i < first + 4) continue;
    if (carry == 0) return;
    if (carry == -1) {
      std::fill(words + i + 1, words + kTopDigit, std::int64_t{0xffffffff});
      words[kTopDigit] -= 1;
      return;
    }
  }
  words[kTopDigit] += carry;
}

void ExactNormalize(std::int64_t* words) {
  // Words that are normalized already, as the sums leave most of them, have no carry
  // to propagate: ExactCarry's loop, 17 dependent steps, runs only for the others.
  // Both give the same words.
  if (DigitsOutOfRange(words) != 0) ExactCarry(words);  // the special word is not touched
}

void ExactAddFloatNormalized(std::int64_t* words, float x) {
  const int first = ExactAddFloat(words, x);
  if (first < 0) return;
  // Digits below `first` are untouched and normalized: ExactCarry's loop from there,
  // until a carry past the second touched digit is zero.
  std::int64_t carry = 0;
  for (int i = first; i < kTopDigit; ++i) {
    const std::int64_t word = words[i] + carry;
    carry = word >> 32;
    words[i] = word & 0xffffffff;
    if (carry == 0 && i > first) return;
  }
  words[kTopDigit] += carry;
}

// Normalized words (every digit below the top one in [0, 2^32), as BatchRunner and
// ExactAddFloatNormalized leave them) are V's two's complement bits as they are,
// whatever its sign: no carries to propagate and no second pass for a negative V.
// V's top bits are read as one int64 m = floor(V / 2^lsb) and the bits below as a
// sticky bit, and RoundFloatFast rounds them. Other words, and values that round to
// a subnormal or zero, take RoundExact.
float ExactToFloat(const std::int64_t* words) {
  if ((static_cast<std::uint64_t>(words[kSpecialWord]) | DigitsOutOfRange(words)) == 0) {
    const std::int64_t top = words[kTopDigit];
    const std::int64_t sign = top >> 63;  // 0 or -1
    // window: V's bits from digit `low` up, its sign included.
    Uint128 window;
    int low;
    if (top != sign) [[unlikely]] {
      low = kTopDigit - 2;
      window = static_cast<Uint128>(top) << 64 | static_cast<Uint128>(words[kTopDigit - 1]) << 32 |
               static_cast<std::uint64_t>(words[kTopDigit - 2]);
    } else {
      // The highest digit that is not the sign's extension (all zeros or all ones).
      const std::int64_t fill = sign & 0xffffffff;
      int high = kTopDigit - 1;
      while (high > 2 && words[high] == fill) --high;
      low = high - 2;
      window = static_cast<Uint128>(sign) << 96 | static_cast<Uint128>(words[high]) << 64 |
               static_cast<Uint128>(words[high - 1]) << 32 | static_cast<std::uint64_t>(words[low]);
    }
    std::uint64_t below = 0;
    for (int i = 0; i < low; ++i) below |= static_cast<std::uint64_t>(words[i]);
    // m: the window's top 64 bits, its sign and at least 61 more where it has them.
    const auto signed_window = static_cast<ExactInt128>(window);
    const auto magnitude_bits = static_cast<Uint128>(signed_window ^ (signed_window >> 127));
    const auto high_word = static_cast<std::uint64_t>(magnitude_bits >> 64);
    const int width = high_word != 0 ? 64 + std::bit_width(high_word)
                                     : static_cast<int>(std::bit_width(static_cast<std::uint64_t>(magnitude_bits)));
    const int shift = std::max(0, width - 63);
    const bool sticky = below != 0 || (window & ((Uint128{1} << shift) - 1)) != 0;
    float out;
    if (exact_internal::RoundFloatFast(static_cast<std::int64_t>(signed_window >> shift), sticky, 32 * low + shift,
                                       out))
      return out;
  }
  return RoundExact<float, 24, -149>(words);
}

double ExactToDouble(const std::int64_t* words) { return RoundExact<double, 53, -1074>(words); }

bool ExactIsZero(const std::int64_t* words) {
  std::int64_t copy[kExactWords];
  std::copy(words, words + kExactWords, copy);
  ExactNormalize(copy);
  return std::all_of(copy, copy + kExactWords, [](std::int64_t word) { return word == 0; });
}

void ExactToFloats(std::span<const std::int64_t> words, std::span<float> out) {
  assert(words.size() == out.size() * kExactWords);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = ExactToFloat(words.data() + i * kExactWords);
}

void ExactNormalizeAll(std::span<std::int64_t> words) {
  assert(words.size() % kExactWords == 0);
  for (std::size_t i = 0; i < words.size(); i += kExactWords) ExactNormalize(words.data() + i);
}

}  // namespace dtlab
