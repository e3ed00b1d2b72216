// Exact sums: fixed-point accumulators of int64 words that hold any sum of float32
// values and float32 x float32 products exactly, so that a sum does not depend on
// the order or grouping of its terms (docs/exact.md).
//
// An accumulator is kExactWords int64 words. Words 0 .. kExactDigitWords-1 are
// base-2^32 digits, least significant first: the value is
//     sum_i words[i] * 2^(32*i + kExactLsbExponent).
// A float32 x float32 product is a multiple of 2^-298 and below 2^256 in magnitude,
// so every such product (and every float32) is an integer number of units and fits.
// Each digit word holds a 32-bit digit plus signed carry room: adding a term adds
// less than 2^32 in magnitude to each word it touches, so up to 2^30 additions (or
// merges of normalized accumulators) fit before ExactNormalize must run. The last
// digit word is signed and carries the sign of the whole value; it has no digit
// above it to carry into, so it takes everything from 2^(32*17 - 298) = 2^246 up
// (a term of ExactAddDouble near 2^300 adds up to 2^54 to it), and it overflows
// only if the magnitudes of the terms summed reach about 2^308, far beyond any
// 2^30 floats (< 2^158) or products (< 2^286).
//
// The last word (index kExactDigitWords) counts non-finite terms: NaN adds
// kExactNanUnit, +inf kExactPosInfUnit, -inf kExactNegInfUnit (each count below
// 2^20). Rounding gives NaN if any NaN (or both infinities) was added, +-inf if one
// infinity was, else the correctly rounded finite sum. A zero sum rounds to +0 (the
// words cannot tell -0 terms from +0 ones); a nonzero sum that rounds to zero keeps
// its sign (-0 for a negative one), as IEEE 754 rounding does.
//
// Merging two accumulators is word-wise integer addition (ExactMerge), which is
// what the exact all-reduce does with these words. ExactNormalize brings the
// words to a canonical form (digits in [0, 2^32), the top digit word signed), in
// which equal sums have equal words. Rounding (ExactToFloat) is correct rounding,
// to nearest with ties to even, once, with subnormals and overflow to infinity as
// IEEE 754 specifies.
//
// Thread safety: functions on distinct word arrays may run concurrently.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <span>

namespace dtlab {

__extension__ typedef __int128 ExactInt128;  // GCC and Clang; __extension__ keeps -Wpedantic quiet

inline constexpr int kExactDigitWords = 18;
inline constexpr int kExactWords = kExactDigitWords + 1;
inline constexpr int kExactLsbExponent = -298;  // 2^-298: the smallest float32 x float32 product
inline constexpr std::int64_t kExactNanUnit = std::int64_t{1} << 42;
inline constexpr std::int64_t kExactPosInfUnit = std::int64_t{1} << 21;
inline constexpr std::int64_t kExactNegInfUnit = 1;

/// words += x. REQUIRES: `words` has kExactWords entries. Defined inline below.
inline void ExactAddFloat(std::int64_t* words, float x);
/// words += a * b, the exact product (as computed in double, where it is exact:
/// non-finite operands give the double product's NaN or infinity, inf * 0 = NaN).
/// Defined inline below.
inline void ExactAddProduct(std::int64_t* words, float a, float b);
/// words += x for a double that is a multiple of 2^kExactLsbExponent (true of every
/// float32, every float32 x float32 product, and zero), or non-finite.
/// REQUIRES (checked by assert): that multiple condition and |x| < 2^300.
void ExactAddDouble(std::int64_t* words, double x);
/// words += value * 2^(position + kExactLsbExponent), for a 128-bit integer (the
/// partial sums of a caller's own fixed-point window). REQUIRES: the result stays
/// in the accumulator's range; a negative position only if value's low -position
/// bits are zero.
void ExactAddInt128(std::int64_t* words, ExactInt128 value, int position);
/// dst += src, word by word (the merge of two accumulators).
void ExactMerge(std::int64_t* dst, const std::int64_t* src);
/// Propagates carries: the canonical form of the same value.
void ExactNormalize(std::int64_t* words);
/// The value correctly rounded to float32 (round to nearest, ties to even). `words`
/// need not be normalized.
float ExactToFloat(const std::int64_t* words);
/// The value correctly rounded to double.
double ExactToDouble(const std::int64_t* words);
/// True if the value is exactly zero and no non-finite term was added.
bool ExactIsZero(const std::int64_t* words);

/// Bulk forms over arrays of accumulators (element i's words at i * kExactWords).
/// out[i] = ExactToFloat(element i).
void ExactToFloats(std::span<const std::int64_t> words, std::span<float> out);
/// Normalizes every element in place.
void ExactNormalizeAll(std::span<std::int64_t> words);

/// A single accumulator as a value, for loss sums and metric totals.
class ExactSum {
 public:
  ExactSum() { words_.fill(0); }
  void Add(float x) { ExactAddFloat(words_.data(), x), Count(); }
  void AddProduct(float a, float b) { ExactAddProduct(words_.data(), a, b), Count(); }
  // `other` brings its own pending adds: each of its words may already be as large as
  // its pending_ adds make it, so they count against the carry room too.
  void Merge(const ExactSum& other) {
    ExactMerge(words_.data(), other.words_.data()), pending_ += other.pending_, Count();
  }
  float ToFloat() const { return ExactToFloat(words_.data()); }
  double ToDouble() const { return ExactToDouble(words_.data()); }
  /// The canonical words (normalized).
  std::array<std::int64_t, kExactWords> Words() const {
    auto copy = words_;
    ExactNormalize(copy.data());
    return copy;
  }
  /// Restores an accumulator from words (normalized or not: they are normalized
  /// here, since they may already use up to 2^30 adds of carry room).
  void SetWords(std::span<const std::int64_t, kExactWords> words) {
    std::copy(words.begin(), words.end(), words_.begin()), ExactNormalize(words_.data()), pending_ = 0;
  }
  void Reset() { words_.fill(0), pending_ = 0; }
  std::int64_t* data() { return words_.data(); }
  const std::int64_t* data() const { return words_.data(); }
  friend bool operator==(const ExactSum& a, const ExactSum& b) { return a.Words() == b.Words(); }

 private:
  void Count() {
    if (++pending_ >= (std::int64_t{1} << 29)) ExactNormalize(words_.data()), pending_ = 0;
  }
  std::array<std::int64_t, kExactWords> words_;
  std::int64_t pending_ = 0;
};

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
inline void AddSignedDigit(std::int64_t& word, std::uint64_t digit, std::int64_t sign_mask) {
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
inline DecodedFloat DecodeFiniteFloat(std::uint32_t bits) {
  const std::uint32_t biased_exponent = (bits >> 23) & 0xff;
  const std::uint32_t is_normal = biased_exponent != 0;
  return {(bits & 0x7fffffu) | (is_normal << 23), biased_exponent + 1 - is_normal};
}

}  // namespace exact_internal

inline void ExactAddFloat(std::int64_t* words, float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  // One test for the rare cases: |bits| - 1 wraps around for +-0 and is at least
  // 0x7f7fffff exactly for the infinities and NaNs (exponent field 0xff).
  if ((bits & 0x7fffffffu) - 1 >= 0x7f7fffffu) [[unlikely]] {
    if ((bits & 0x7fffffffu) != 0) ExactAddDouble(words, x);  // non-finite
    return;
  }
  const auto [significand, lsb_exponent] = exact_internal::DecodeFiniteFloat(bits);
  // The significand's lsb, 2^(lsb_exponent - 150), in units of 2^kExactLsbExponent:
  // bit `position` of the accumulator, from 149 (2^-149) to 402 (2^104).
  const std::uint32_t position = lsb_exponent - 150 - kExactLsbExponent;
  // +-significand * 2^(position % 32) is below 2^55 in magnitude: a low digit in
  // [0, 2^32) for the first word and the signed rest (|rest| <= 2^23) for the next.
  const std::int64_t sign_mask = -static_cast<std::int64_t>(bits >> 31);
  const std::int64_t value = (static_cast<std::int64_t>(significand << (position & 31)) ^ sign_mask) - sign_mask;
  std::int64_t* word = words + (position >> 5);
  word[0] += value & 0xffffffff;
  word[1] += value >> 32;  // arithmetic: floor(value / 2^32)
}

inline void ExactAddProduct(std::int64_t* words, float a, float b) {
  const std::uint32_t a_bits = std::bit_cast<std::uint32_t>(a);
  const std::uint32_t b_bits = std::bit_cast<std::uint32_t>(b);
  if (((a_bits & 0x7f800000u) == 0x7f800000u) | ((b_bits & 0x7f800000u) == 0x7f800000u)) [[unlikely]] {
    ExactAddDouble(words, static_cast<double>(a) * static_cast<double>(b));  // NaN or +-inf
    return;
  }
  const auto [a_significand, a_lsb_exponent] = exact_internal::DecodeFiniteFloat(a_bits);
  const auto [b_significand, b_lsb_exponent] = exact_internal::DecodeFiniteFloat(b_bits);
  const std::uint64_t product = a_significand * b_significand;  // < 2^48, exact
  if (product == 0) return;
  // lsb 2^(a_lsb_exponent - 150 + b_lsb_exponent - 150) is accumulator bit
  // 0 (2^-298) .. 506 (2^208); the 48-bit product shifted within its first word
  // spans three words, the highest at most word 17.
  const std::uint32_t position = a_lsb_exponent + b_lsb_exponent - 300 - kExactLsbExponent;
  const std::uint32_t shift = position & 31;
  const std::uint64_t low = product << shift;                  // bits 0..63 of product * 2^shift
  const std::uint64_t high = (product >> 32) >> (32 - shift);  // bits 64..79 (shift < 32)
  const std::int64_t sign_mask = -static_cast<std::int64_t>((a_bits ^ b_bits) >> 31);
  std::int64_t* word = words + (position >> 5);
  exact_internal::AddSignedDigit(word[0], low & 0xffffffffu, sign_mask);
  exact_internal::AddSignedDigit(word[1], low >> 32, sign_mask);
  exact_internal::AddSignedDigit(word[2], high, sign_mask);
}

}  // namespace dtlab
