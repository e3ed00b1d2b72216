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

#include "core/exact_words.h"

namespace dtlab {

// ExactAddFloat (words += x) and ExactAddProduct (words += a * b, exact) are inline
// in core/exact_words.h, which CUDA code includes too.

/// words += x for a double that is a multiple of 2^kExactLsbExponent (true of every
/// float32, every float32 x float32 product, and zero), or non-finite.
/// REQUIRES (checked by assert): that multiple condition and |x| < 2^300.
void ExactAddDouble(std::int64_t* words, double x);
/// words += value * 2^(position + kExactLsbExponent), for a 128-bit integer (the
/// partial sums of a caller's own fixed-point window). REQUIRES: the result stays
/// in the accumulator's range; a negative position only if value's low -position
/// bits are zero.
void ExactAddInt128(std::int64_t* words, ExactInt128 value, int position);
/// words = value * 2^(position + kExactLsbExponent), normalized (the same words as
/// zeroing them, ExactAddInt128, then ExactNormalize), with no non-finite count:
/// carries run only from the digits the value touches. REQUIRES as ExactAddInt128.
void ExactSetInt128(std::int64_t* words, ExactInt128 value, int position);
/// dst += src, word by word (the merge of two accumulators).
void ExactMerge(std::int64_t* dst, const std::int64_t* src);
/// Propagates carries: the canonical form of the same value.
void ExactNormalize(std::int64_t* words);
/// words += x, and normalized words stay normalized (the same words as ExactAddFloat
/// then ExactNormalize): the carries run up from the two digits x touched only as far
/// as they reach. Words that were not normalized keep the right value.
void ExactAddFloatNormalized(std::int64_t* words, float x);
/// The value correctly rounded to float32 (round to nearest, ties to even). `words`
/// need not be normalized; normalized words take a faster path.
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

namespace exact_internal {

/// Rounds m 2^lsb + f to float, for some 0 <= f < 2^lsb (sticky: f != 0), in units
/// of 2^kExactLsbExponent, when that is simple: the result normal or overflowing and
/// the fraction f below the rounding bit. Returns false otherwise.
[[gnu::always_inline]] inline bool RoundFloatFast(std::int64_t m, bool sticky, int lsb, float& out) {
  if (m == 0 && !sticky) return out = 0.0f, true;
  const bool negative = m < 0;
  // A negative m with a fraction: |m 2^lsb + f| = (|m| - 1) 2^lsb + (2^lsb - f).
  const std::uint64_t magnitude =
      negative ? static_cast<std::uint64_t>(-(m + 1)) + (sticky ? 0 : 1) : static_cast<std::uint64_t>(m);
  const int width = std::bit_width(magnitude);
  if (sticky && width < 25) return false;
  const int top_exponent = width - 1 + lsb + kExactLsbExponent;
  if (top_exponent < -126) return false;
  // keep: the 24 significant bits, rounded to nearest even, in [2^23, 2^24].
  std::uint64_t keep;
  if (width > 24) {
    const int shift = width - 24;
    keep = magnitude >> shift;
    const std::uint64_t rest = magnitude & ((std::uint64_t{1} << shift) - 1);
    const std::uint64_t half = std::uint64_t{1} << (shift - 1);
    keep += rest > half || (rest == half && (sticky || (keep & 1) != 0));
  } else {
    keep = magnitude << (24 - width);
  }
  // The float's bits: biased exponent above the 23 fraction bits. A keep of 2^24 (the
  // rounding carried) adds one to the exponent, and past 2^127 gives infinity's bits.
  const std::uint32_t bits = top_exponent > 127 ? 0x7f800000u
                                                : (static_cast<std::uint32_t>(top_exponent + 127) << 23) +
                                                      static_cast<std::uint32_t>(keep - (std::uint64_t{1} << 23));
  out = std::bit_cast<float>(bits | (negative ? 0x80000000u : 0u));
  return true;
}

}  // namespace exact_internal

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

}  // namespace dtlab
