// Tests of the exact accumulators (core/exact_sum.h) against an independent
// reference: a plain two's-complement big integer that adds each term bit by bit
// and never carries lazily. Rounding is checked by definition rather than by a
// second rounding routine: a result r is the correct rounding of the exact value v
// when no neighbour of r is nearer to v, and a tie goes to the even one (with the
// overflow threshold and the sign of zero as IEEE 754 specifies).
#include "core/exact_sum.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace dtlab {
namespace {

using Words = std::array<std::int64_t, kExactWords>;

// ---------------------------------------------------------------------------
// The reference: an integer number of 2^-400 units in 48 32-bit limbs, two's
// complement (range +-2^1135, past DBL_MAX). 2^-400 is fine enough to hold every double that
// rounding can return for a nonzero sum (>= 2^-298, so its ulp is >= 2^-350) and
// half of every float ulp, so distances to neighbours are exact too.
class Reference {
 public:
  static constexpr int kUnitExponent = -400;
  static constexpr int kLimbs = 48;

  Reference() { limbs_.fill(0); }

  // += (-1)^negative * magnitude * 2^exponent. REQUIRES: exponent >= -400.
  void Add(bool negative, std::uint64_t magnitude, int exponent) {
    Reference term;
    for (int bit = 0; bit < 64; ++bit) {
      if ((magnitude >> bit) & 1) term.SetBit(exponent - kUnitExponent + bit);
    }
    if (negative) term.Negate();
    *this += term;
  }
  // += x for a finite double (exact: it is split into its integer significand).
  void AddDouble(double x) {
    if (x == 0) return;
    int exponent = 0;
    const double fraction = std::frexp(std::fabs(x), &exponent);  // in [0.5, 1)
    Add(x < 0, static_cast<std::uint64_t>(std::ldexp(fraction, 53)), exponent - 53);
  }
  static Reference OfDouble(double x) {
    Reference r;
    r.AddDouble(x);
    return r;
  }
  static Reference PowerOfTwo(int exponent) {
    Reference r;
    r.Add(false, 1, exponent);
    return r;
  }
  // The value an accumulator's digit words stand for, by the header's definition.
  static Reference OfWords(const std::int64_t* words) {
    Reference r;
    for (int i = 0; i < kExactDigitWords; ++i) {
      const std::int64_t w = words[i];
      const std::uint64_t magnitude = w < 0 ? 0 - static_cast<std::uint64_t>(w) : static_cast<std::uint64_t>(w);
      r.Add(w < 0, magnitude, 32 * i + kExactLsbExponent);
    }
    return r;
  }

  Reference& operator+=(const Reference& other) {
    std::uint64_t carry = 0;
    for (int i = 0; i < kLimbs; ++i) {
      const std::uint64_t sum = std::uint64_t{limbs_[i]} + other.limbs_[i] + carry;
      limbs_[i] = static_cast<std::uint32_t>(sum);
      carry = sum >> 32;
    }
    return *this;
  }
  Reference operator-() const {
    Reference r = *this;
    r.Negate();
    return r;
  }
  friend Reference operator+(Reference a, const Reference& b) { return a += b; }
  friend Reference operator-(const Reference& a, const Reference& b) { return a + -b; }
  bool IsNegative() const { return limbs_.back() >> 31; }
  bool IsZero() const {
    return std::all_of(limbs_.begin(), limbs_.end(), [](std::uint32_t l) { return l == 0; });
  }
  Reference Abs() const { return IsNegative() ? -*this : *this; }
  friend bool operator==(const Reference& a, const Reference& b) { return a.limbs_ == b.limbs_; }
  friend bool operator<(const Reference& a, const Reference& b) { return (a - b).IsNegative(); }

  std::string ToString() const {
    std::ostringstream out;
    out << (IsNegative() ? "-" : "+") << "0x";
    const Reference magnitude = Abs();
    for (int i = kLimbs - 1; i >= 0; --i) out << std::hex << magnitude.limbs_[i] << (i ? "_" : "");
    out << " * 2^-400";
    return out.str();
  }

 private:
  void SetBit(int bit) {
    ASSERT_GE(bit, 0);
    ASSERT_LT(bit, 32 * kLimbs - 1);
    limbs_[bit / 32] |= std::uint32_t{1} << (bit % 32);
  }
  void Negate() {
    for (std::uint32_t& limb : limbs_) limb = ~limb;
    Reference one;
    one.limbs_[0] = 1;
    *this += one;
  }

  std::array<std::uint32_t, kLimbs> limbs_;
};

// The exact value of the float x float product (exact in double).
double ExactProduct(float a, float b) { return static_cast<double>(a) * static_cast<double>(b); }

template <typename Float>
bool SignificandIsEven(Float x) {
  if constexpr (sizeof(Float) == 4) {
    return (std::bit_cast<std::uint32_t>(x) & 1) == 0;
  } else {
    return (std::bit_cast<std::uint64_t>(x) & 1) == 0;
  }
}

// Empty if `result` is the correctly rounded value (to nearest, ties to even) of
// `exact` in Float; otherwise what is wrong.
template <typename Float>
std::string RoundingError(const Reference& exact, Float result) {
  using Limits = std::numeric_limits<Float>;
  std::ostringstream out;
  out.precision(Limits::max_digits10);
  out << "exact " << exact.ToString() << ", got " << std::hexfloat << result << ": ";
  constexpr int kOverflowExponent = Limits::max_exponent;  // 2^128 / 2^1024
  if (std::isnan(result)) return out.str() + "NaN for a finite sum";
  if (exact.IsZero()) {
    if (result != 0 || std::signbit(result)) return out.str() + "an exact zero must give +0";
    return "";
  }
  if (std::signbit(result) != exact.IsNegative()) return out.str() + "wrong sign";
  const Reference magnitude = exact.Abs();
  const Reference largest = Reference::OfDouble(static_cast<double>(Limits::max()));
  const Reference overflow = Reference::PowerOfTwo(kOverflowExponent);
  if (std::isinf(result)) {
    // IEEE 754: overflow when the value rounded with unbounded exponent is 2^emax+1,
    // i.e. when |v| >= max + ulp(max)/2 (the tie goes to 2^128, max being odd).
    if (magnitude + magnitude < largest + overflow) return out.str() + "overflowed below the threshold";
    return "";
  }
  const Float abs_result = std::fabs(result);
  const Reference rounded = Reference::OfDouble(static_cast<double>(abs_result));
  const Reference up = abs_result == Limits::max()
                           ? overflow
                           : Reference::OfDouble(static_cast<double>(std::nextafter(abs_result, Limits::infinity())));
  const Reference distance = (magnitude - rounded).Abs();
  const Reference distance_up = (magnitude - up).Abs();
  if (distance_up < distance) return out.str() + "the next value up is nearer";
  bool tie = distance == distance_up;
  if (abs_result != 0) {
    const Reference down = Reference::OfDouble(static_cast<double>(std::nextafter(abs_result, Float{0})));
    const Reference distance_down = (magnitude - down).Abs();
    if (distance_down < distance) return out.str() + "the next value down is nearer";
    tie = tie || distance == distance_down;
  }
  if (tie && !SignificandIsEven(abs_result)) return out.str() + "a tie went to the odd neighbour";
  return "";
}

// Checks both roundings of `words` against `exact`, as they are and normalized
// (ExactToFloat has a path of its own for normalized words).
std::string CheckRoundings(const std::int64_t* words, const Reference& exact) {
  std::string error = RoundingError<float>(exact, ExactToFloat(words));
  if (!error.empty()) return "float: " + error;
  error = RoundingError<double>(exact, ExactToDouble(words));
  if (!error.empty()) return "double: " + error;
  std::array<std::int64_t, kExactWords> normalized;
  std::copy_n(words, kExactWords, normalized.begin());
  ExactNormalize(normalized.data());
  error = RoundingError<float>(exact, ExactToFloat(normalized.data()));
  if (!error.empty()) return "float, normalized: " + error;
  return "";
}

Words Normalized(Words words) {
  ExactNormalize(words.data());
  return words;
}

Words Zero() {
  Words words;
  words.fill(0);
  return words;
}

// A term of a sum: a float or a product of two.
struct Term {
  float a = 0;
  float b = 1;
  bool is_product = false;

  void AddTo(std::int64_t* words) const {
    if (is_product) {
      ExactAddProduct(words, a, b);
    } else {
      ExactAddFloat(words, a);
    }
  }
  double Value() const { return is_product ? ExactProduct(a, b) : a; }
};

void showValue(const Term& term, std::ostream& os) {
  os << std::hexfloat << term.a;
  if (term.is_product) os << " * " << term.b;
}

// ---------------------------------------------------------------------------
// Generators. RapidCheck scales integer ranges with its size parameter; exponents
// are drawn at full size so that every size sees the whole range.

float FloatFromFields(bool negative, std::uint32_t biased_exponent, std::uint32_t mantissa) {
  return std::bit_cast<float>((std::uint32_t{negative} << 31) | (biased_exponent << 23) | (mantissa & 0x7fffff));
}

rc::Gen<std::uint32_t> Uniform(std::uint32_t min, std::uint32_t max_exclusive) {
  return rc::gen::resize(rc::kNominalSize, rc::gen::inRange(min, max_exclusive));
}

rc::Gen<std::uint32_t> AnyMantissa() {
  return rc::gen::weightedOneOf<std::uint32_t>({
      {4, rc::gen::resize(rc::kNominalSize, rc::gen::arbitrary<std::uint32_t>())},
      {1, rc::gen::element(0u, 1u, 0x7fffffu, 0x400000u)},
  });
}

// Finite floats of every exponent (subnormals included), and the edge values.
rc::Gen<float> AnyFiniteFloat() {
  return rc::gen::weightedOneOf<float>({
      {8, rc::gen::apply(FloatFromFields, rc::gen::arbitrary<bool>(), Uniform(0, 255), AnyMantissa())},
      {1, rc::gen::element(0.0f, -0.0f, 0x1p-149f, -0x1p-149f, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN,
                           0x1.fffffcp-127f /* largest subnormal */, 1.0f, -1.0f)},
  });
}

// Floats whose exponents lie in a band of `width` binades starting at `lowest`.
rc::Gen<float> FloatInBand(std::uint32_t lowest, std::uint32_t width) {
  return rc::gen::apply(FloatFromFields, rc::gen::arbitrary<bool>(), Uniform(lowest, std::min(lowest + width, 255u)),
                        AnyMantissa());
}

// Floats of one random band per sum, so that terms interact (carries, cancellation
// and rounding all involve several terms) rather than one term dominating.
rc::Gen<std::vector<float>> ClusteredFloats() {
  return rc::gen::mapcat(Uniform(0, 255), [](std::uint32_t lowest) {
    return rc::gen::container<std::vector<float>>(FloatInBand(lowest, 10));
  });
}

rc::Gen<Term> AnyTerm() {
  return rc::gen::weightedOneOf<Term>({
      {1, rc::gen::map(AnyFiniteFloat(),
                       [](float a) {
                         return Term{a, 1, false};
                       })},
      {1, rc::gen::apply(
              [](float a, float b) {
                return Term{a, b, true};
              },
              AnyFiniteFloat(), AnyFiniteFloat())},
  });
}

// Products whose value is near the float subnormal range (2^-155 .. 2^-120), where
// float rounding has a fixed quantum of 2^-149.
rc::Gen<Term> ProductNearFloatSubnormals() {
  return rc::gen::apply(
      [](bool negative, std::uint32_t a_exponent, int target, std::uint32_t a_mantissa, std::uint32_t b_mantissa) {
        const int b_exponent = std::clamp(target + 254 - static_cast<int>(a_exponent), 0, 254);
        return Term{FloatFromFields(negative, a_exponent, a_mantissa),
                    FloatFromFields(false, static_cast<std::uint32_t>(b_exponent), b_mantissa), true};
      },
      rc::gen::arbitrary<bool>(), Uniform(60, 120), rc::gen::resize(rc::kNominalSize, rc::gen::inRange(-155, -119)),
      AnyMantissa(), AnyMantissa());
}

Words SumOf(const std::vector<Term>& terms) {
  Words words = Zero();
  for (const Term& term : terms) term.AddTo(words.data());
  return words;
}

Reference ReferenceSum(const std::vector<Term>& terms) {
  Reference exact;
  for (const Term& term : terms) exact.AddDouble(term.Value());
  return exact;
}

std::vector<Term> FloatTerms(const std::vector<float>& xs) {
  std::vector<Term> terms;
  for (float x : xs) terms.push_back({x, 1, false});
  return terms;
}

// ---------------------------------------------------------------------------
// Correct rounding of random sums.

RC_GTEST_PROP(ExactSumProperty, FloatSumsRoundCorrectly, ()) {
  const auto xs = *rc::gen::container<std::vector<float>>(AnyFiniteFloat());
  const std::vector<Term> terms = FloatTerms(xs);
  const Words words = SumOf(terms);
  const std::string error = CheckRoundings(words.data(), ReferenceSum(terms));
  RC_ASSERT(error == "");
}

RC_GTEST_PROP(ExactSumProperty, ClusteredFloatSumsRoundCorrectly, ()) {
  const std::vector<Term> terms = FloatTerms(*ClusteredFloats());
  const Words words = SumOf(terms);
  const std::string error = CheckRoundings(words.data(), ReferenceSum(terms));
  RC_ASSERT(error == "");
}

RC_GTEST_PROP(ExactSumProperty, MixedSumsOfFloatsAndProductsRoundCorrectly, ()) {
  const auto terms = *rc::gen::container<std::vector<Term>>(AnyTerm());
  const Words words = SumOf(terms);
  const std::string error = CheckRoundings(words.data(), ReferenceSum(terms));
  RC_ASSERT(error == "");
}

RC_GTEST_PROP(ExactSumProperty, SumsThatRoundIntoFloatSubnormalsRoundCorrectly, ()) {
  const auto terms = *rc::gen::container<std::vector<Term>>(ProductNearFloatSubnormals());
  const Words words = SumOf(terms);
  const std::string error = CheckRoundings(words.data(), ReferenceSum(terms));
  RC_ASSERT(error == "");
}

// Values in the top two binades: sums that overflow float or just do not.
RC_GTEST_PROP(ExactSumProperty, SumsNearFloatMaxRoundCorrectly, ()) {
  auto xs = *rc::gen::container<std::vector<float>>(FloatInBand(252, 3));
  xs.push_back(*rc::gen::element(FLT_MAX, -FLT_MAX, 0x1p103f, -0x1p103f, 0.0f));
  const std::vector<Term> terms = FloatTerms(xs);
  const Words words = SumOf(terms);
  const std::string error = CheckRoundings(words.data(), ReferenceSum(terms));
  RC_ASSERT(error == "");
}

// x_1 + ... + x_n + tiny - x_n - ... - x_1 in a shuffled order: only `tiny` is
// left, and a naive float sum would lose it entirely.
RC_GTEST_PROP(ExactSumProperty, MassiveCancellationLeavesTheTinyTerm, (std::uint64_t seed)) {
  const auto xs = *rc::gen::container<std::vector<Term>>(AnyTerm());
  const Term tiny = *rc::gen::element(Term{0x1p-149f, 1, false}, Term{-0x1p-149f, 0x1p-149f, true},
                                      Term{0x1.8p-149f, 0x1p-1f, true}, Term{3.0f, 0x1p-140f, true});
  std::vector<Term> terms = xs;
  for (const Term& x : xs) terms.push_back({-x.a, x.b, x.is_product});
  terms.push_back(tiny);
  std::mt19937_64 rng(seed);
  std::shuffle(terms.begin(), terms.end(), rng);
  const Words words = SumOf(terms);
  const Reference exact = Reference::OfDouble(tiny.Value());
  RC_ASSERT(ReferenceSum(terms) == exact);
  RC_ASSERT(CheckRoundings(words.data(), exact) == "");
  Words only_tiny = Zero();
  tiny.AddTo(only_tiny.data());
  RC_ASSERT(Normalized(words) == Normalized(only_tiny));
}

// r + ulp(r)/2 (+ noise that cancels) is a tie: it rounds to r if r is even, else
// to the next float; a term of 2^-298 either way breaks the tie.
RC_GTEST_PROP(ExactSumProperty, FloatTiesRoundToEven, (std::uint64_t seed)) {
  const float r = *rc::gen::weightedOneOf<float>({
      {6, rc::gen::apply(FloatFromFields, rc::gen::arbitrary<bool>(), Uniform(0, 255), AnyMantissa())},
      {1, rc::gen::element(FLT_MAX, -FLT_MAX, 0x1p-149f, 0x1.fffffcp-127f, 1.0f)},
  });
  const int breaker = *rc::gen::element(-1, 0, 1);
  const std::uint32_t biased_exponent = (std::bit_cast<std::uint32_t>(r) >> 23) & 0xff;
  const float ulp = std::ldexp(1.0f, static_cast<int>(std::max(biased_exponent, 1u)) - 150);
  const float sign = std::signbit(r) ? -1.0f : 1.0f;
  std::vector<Term> terms = {{r, 1, false}, {sign * ulp, 0.5f, true}};
  if (breaker != 0) terms.push_back({breaker * 0x1p-149f, 0x1p-149f, true});
  for (const Term& noise : *rc::gen::container<std::vector<Term>>(AnyTerm())) {
    terms.push_back(noise);
    terms.push_back({-noise.a, noise.b, noise.is_product});
  }
  std::mt19937_64 rng(seed);
  std::shuffle(terms.begin(), terms.end(), rng);
  const Words words = SumOf(terms);

  const float away = std::nextafter(r, sign * std::numeric_limits<float>::infinity());
  const bool round_away = breaker * sign > 0 || (breaker == 0 && !SignificandIsEven(r));
  const float expected = round_away ? away : r;
  RC_ASSERT(std::bit_cast<std::uint32_t>(ExactToFloat(words.data())) == std::bit_cast<std::uint32_t>(expected));
  RC_ASSERT(std::bit_cast<std::uint32_t>(ExactToFloat(Normalized(words).data())) ==
            std::bit_cast<std::uint32_t>(expected));
  RC_ASSERT(CheckRoundings(words.data(), ReferenceSum(terms)) == "");
}

// The same for double: M * 2^(e-52) with a random 53-bit M, written as three floats
// of 18 bits each, plus half its ulp.
RC_GTEST_PROP(ExactSumProperty, DoubleTiesRoundToEven, (std::uint64_t seed)) {
  const std::uint64_t significand =
      (*rc::gen::resize(rc::kNominalSize, rc::gen::arbitrary<std::uint64_t>()) >> 11) | (std::uint64_t{1} << 52);
  const int exponent = *rc::gen::resize(rc::kNominalSize, rc::gen::inRange(-90, 120));
  const bool negative = *rc::gen::arbitrary<bool>();
  const int breaker = *rc::gen::element(-1, 0, 1);
  const float sign = negative ? -1.0f : 1.0f;
  std::vector<Term> terms;
  for (int piece = 0; piece < 3; ++piece) {
    const auto chunk = static_cast<float>((significand >> (18 * piece)) & 0x3ffff);
    terms.push_back({sign * std::ldexp(chunk, exponent - 52 + 18 * piece), 1, false});
  }
  terms.push_back({sign * std::ldexp(1.0f, exponent - 53), 1, false});
  if (breaker != 0) terms.push_back({breaker * 0x1p-149f, 0x1p-149f, true});
  std::mt19937_64 rng(seed);
  std::shuffle(terms.begin(), terms.end(), rng);
  const Words words = SumOf(terms);

  const bool round_away = breaker * sign > 0 || (breaker == 0 && (significand & 1));
  const double expected =
      (negative ? -1.0 : 1.0) * std::ldexp(static_cast<double>(significand + round_away), exponent - 52);
  RC_ASSERT(std::bit_cast<std::uint64_t>(ExactToDouble(words.data())) == std::bit_cast<std::uint64_t>(expected));
  RC_ASSERT(CheckRoundings(words.data(), ReferenceSum(terms)) == "");
}

// ---------------------------------------------------------------------------
// Order independence and the canonical form.

// A random permutation, cut into random parts, each summed into its own
// accumulator (normalized or not at random points) and merged: the same words.
RC_GTEST_PROP(ExactSumProperty, PermutedSplitAndMergedGivesIdenticalWords, (std::uint64_t seed)) {
  const auto terms = *rc::gen::container<std::vector<Term>>(AnyTerm());
  const Words expected = Normalized(SumOf(terms));
  std::mt19937_64 rng(seed);
  std::vector<Term> permuted = terms;
  std::shuffle(permuted.begin(), permuted.end(), rng);
  const int num_parts = 1 + static_cast<int>(rng() % 5);
  std::vector<Words> parts(static_cast<std::size_t>(num_parts), Zero());
  for (const Term& term : permuted) {
    Words& part = parts[rng() % parts.size()];
    term.AddTo(part.data());
    if (rng() % 8 == 0) ExactNormalize(part.data());
  }
  Words merged = Zero();
  for (const Words& part : parts) ExactMerge(merged.data(), part.data());
  RC_ASSERT(Normalized(merged) == expected);
  RC_ASSERT(std::bit_cast<std::uint32_t>(ExactToFloat(merged.data())) ==
            std::bit_cast<std::uint32_t>(ExactToFloat(expected.data())));
  RC_ASSERT(std::bit_cast<std::uint64_t>(ExactToDouble(merged.data())) ==
            std::bit_cast<std::uint64_t>(ExactToDouble(expected.data())));
  RC_ASSERT(ExactIsZero(merged.data()) == ReferenceSum(terms).IsZero());
}

RC_GTEST_PROP(ExactSumProperty, NormalizeIsIdempotentCanonicalAndKeepsTheValue, ()) {
  const auto terms = *rc::gen::container<std::vector<Term>>(AnyTerm());
  const Words raw = SumOf(terms);
  const Words once = Normalized(raw);
  RC_ASSERT(Normalized(once) == once);
  for (int i = 0; i + 1 < kExactDigitWords; ++i) {
    RC_ASSERT(once[i] >= 0);
    RC_ASSERT(once[i] < (std::int64_t{1} << 32));
  }
  RC_ASSERT(once[kExactDigitWords] == raw[kExactDigitWords]);
  RC_ASSERT(Reference::OfWords(once.data()) == ReferenceSum(terms));
  RC_ASSERT(Reference::OfWords(raw.data()) == ReferenceSum(terms));
  // Rounding does not depend on normalization either.
  RC_ASSERT(std::bit_cast<std::uint64_t>(ExactToDouble(raw.data())) ==
            std::bit_cast<std::uint64_t>(ExactToDouble(once.data())));
}

// Arbitrary (even wildly unnormalized) digit words: normalize keeps the value and
// rounding is still correct. Words up to +-2^62 stand for 2^30 adds of carry room.
RC_GTEST_PROP(ExactSumProperty, ArbitraryWordsNormalizeAndRoundCorrectly, ()) {
  Words words = Zero();
  const auto magnitude_bits = *rc::gen::resize(rc::kNominalSize, rc::gen::inRange(0, 63));
  for (int i = 0; i < kExactDigitWords; ++i) {
    const auto raw = *rc::gen::resize(rc::kNominalSize, rc::gen::arbitrary<std::int64_t>());
    // Keep the top word small enough that the value stays below 2^300.
    const int bits = i == kExactDigitWords - 1 ? std::min(magnitude_bits, 50) : magnitude_bits;
    words[i] = raw >> (63 - bits);
  }
  const Reference exact = Reference::OfWords(words.data());
  const Words normalized = Normalized(words);
  RC_ASSERT(Reference::OfWords(normalized.data()) == exact);
  RC_ASSERT(CheckRoundings(words.data(), exact) == "");
  RC_ASSERT(ExactIsZero(words.data()) == exact.IsZero());
}

// Adding a float to normalized words with ExactAddFloatNormalized gives the words of
// adding it and normalizing everything: the carries that stop early lose nothing.
RC_GTEST_PROP(ExactSumProperty, AddFloatNormalizedKeepsTheCanonicalWords, ()) {
  const auto terms = *rc::gen::container<std::vector<Term>>(AnyTerm());
  const Words start = Normalized(SumOf(terms));
  const auto x = *rc::gen::weightedOneOf<float>({
      {8, rc::gen::apply(FloatFromFields, rc::gen::arbitrary<bool>(), Uniform(0, 254), AnyMantissa())},
      {1, rc::gen::element(0.0f, -0.0f, std::numeric_limits<float>::infinity(), FLT_MAX, -FLT_MAX, 0x1p-149f)},
  });
  Words fast = start, reference = start;
  ExactAddFloatNormalized(fast.data(), x);
  ExactAddFloat(reference.data(), x);
  RC_ASSERT(fast == Normalized(reference));
}

// ExactSetInt128 gives the words of zeroing, ExactAddInt128 and ExactNormalize, for
// values of 0 to 120 bits of either sign (the borrow of a negative one runs to the
// top digit), at positions from below the accumulator's lsb to near its top.
RC_GTEST_PROP(ExactSumProperty, SetInt128GivesTheNormalizedWordsOfAnAdd, ()) {
  const int width = *rc::gen::inRange(0, 121);
  ExactInt128 value = 0;
  for (int b = 0; b < width; b += 30) value = (value << 30) | *rc::gen::inRange(0, 1 << 30);
  if (width > 0) value &= (ExactInt128{1} << width) - 1;
  if (*rc::gen::arbitrary<bool>()) value = -value;
  int position = *rc::gen::inRange(-20, 440);
  if (position < 0) value = value / (ExactInt128{1} << -position) * (ExactInt128{1} << -position);
  Words set, reference = Zero();
  set.fill(77);
  ExactSetInt128(set.data(), value, position);
  ExactAddInt128(reference.data(), value, position);
  ExactNormalize(reference.data());
  RC_ASSERT(set == reference);
}

TEST(ExactSumTest, EqualValuesHaveEqualWords) {
  // 3 = 1 + 2 = x + x - (2x - 3) = 1.5 * 2 = 0.75 + 0.75 + 0.75 + 0.75 + 0 + 0:
  // other terms, other orders, with and without normalizing in between.
  Words a = Zero(), b = Zero(), c = Zero(), d = Zero();
  ExactAddFloat(a.data(), 1), ExactAddFloat(a.data(), 2);
  // x's digit in word 9 is nearly 2^32, so x + x leaves a carry pending there.
  const float x = 0x1.fffffep21f;
  ExactAddFloat(b.data(), x), ExactAddFloat(b.data(), x), ExactAddFloat(b.data(), -(2 * x - 3));
  ExactAddProduct(c.data(), 1.5f, 2);
  for (int i = 0; i < 4; ++i) ExactAddFloat(d.data(), 0.75f), ExactNormalize(d.data());
  ExactAddFloat(d.data(), -0.0f), ExactAddProduct(d.data(), 0.0f, -5);
  EXPECT_NE(a, b);  // not yet normalized: different carry-save words
  EXPECT_EQ(Normalized(a), Normalized(b));
  EXPECT_EQ(Normalized(a), Normalized(c));
  EXPECT_EQ(Normalized(a), Normalized(d));
  EXPECT_EQ(ExactToFloat(b.data()), 3.0f);
  // A negative value: the top word is signed and the digits below are positive.
  Words minus_one = Zero();
  ExactAddFloat(minus_one.data(), -1.0f);
  const Words n = Normalized(minus_one);
  EXPECT_EQ(n[kExactDigitWords - 1], -1);
  // -2^298 units = -2^544 + (2^544 - 2^298): bits 298 .. 543 set, 298 = 32 * 9 + 10.
  for (int i = 0; i < kExactDigitWords - 1; ++i) {
    EXPECT_EQ(n[i], i < 9 ? 0 : (i == 9 ? 0xfffffc00 : 0xffffffff)) << i;
  }
}

// ---------------------------------------------------------------------------
// Known values and edge cases.

TEST(ExactSumTest, SimpleSums) {
  Words w = Zero();
  EXPECT_TRUE(ExactIsZero(w.data()));
  EXPECT_EQ(ExactToFloat(w.data()), 0.0f);
  EXPECT_FALSE(std::signbit(ExactToFloat(w.data())));
  ExactAddFloat(w.data(), 0.1f);
  ExactAddFloat(w.data(), 0.2f);
  EXPECT_EQ(ExactToDouble(w.data()), static_cast<double>(0.1f) + static_cast<double>(0.2f));  // exact in double
  EXPECT_EQ(ExactToFloat(w.data()), static_cast<float>(static_cast<double>(0.1f) + static_cast<double>(0.2f)));
  ExactAddFloat(w.data(), -0.1f);
  ExactAddFloat(w.data(), -0.2f);
  EXPECT_TRUE(ExactIsZero(w.data()));
  EXPECT_EQ(ExactToFloat(w.data()), 0.0f);
  EXPECT_FALSE(std::signbit(ExactToFloat(w.data())));
  // 2^100 + 1 - 2^100 = 1, which float and double addition both lose.
  ExactAddFloat(w.data(), 0x1p100f), ExactAddFloat(w.data(), 1), ExactAddFloat(w.data(), -0x1p100f);
  EXPECT_EQ(ExactToFloat(w.data()), 1.0f);
  EXPECT_EQ(ExactToDouble(w.data()), 1.0);
}

TEST(ExactSumTest, ExtremeProducts) {
  Words w = Zero();
  ExactAddProduct(w.data(), 0x1p-149f, 0x1p-149f);  // 2^-298, the smallest product
  EXPECT_EQ(w[0], 1);
  EXPECT_EQ(ExactToDouble(w.data()), 0x1p-298);
  EXPECT_EQ(ExactToFloat(w.data()), 0.0f);
  EXPECT_FALSE(std::signbit(ExactToFloat(w.data())));
  EXPECT_FALSE(ExactIsZero(w.data()));

  Words negative = Zero();
  ExactAddProduct(negative.data(), -0x1p-149f, 0x1p-149f);
  EXPECT_EQ(ExactToDouble(negative.data()), -0x1p-298);
  EXPECT_EQ(ExactToFloat(negative.data()), 0.0f);
  EXPECT_TRUE(std::signbit(ExactToFloat(negative.data())));  // a negative value rounds to -0

  // Largest subnormal squared, and subnormal x FLT_MAX.
  Words mixed = Zero();
  ExactAddProduct(mixed.data(), 0x1.fffffcp-127f, 0x1.fffffcp-127f);
  ExactAddProduct(mixed.data(), 0x1p-149f, FLT_MAX);
  const Reference exact = Reference::OfDouble(ExactProduct(0x1.fffffcp-127f, 0x1.fffffcp-127f)) +
                          Reference::OfDouble(ExactProduct(0x1p-149f, FLT_MAX));
  EXPECT_EQ(CheckRoundings(mixed.data(), exact), "");

  Words huge = Zero();
  ExactAddProduct(huge.data(), FLT_MAX, FLT_MAX);
  EXPECT_EQ(ExactToDouble(huge.data()), ExactProduct(FLT_MAX, FLT_MAX));
  EXPECT_EQ(ExactToFloat(huge.data()), std::numeric_limits<float>::infinity());
  ExactAddProduct(huge.data(), -FLT_MAX, FLT_MAX);
  EXPECT_TRUE(ExactIsZero(huge.data()));
  ExactAddProduct(huge.data(), -FLT_MAX, FLT_MAX);
  EXPECT_EQ(ExactToDouble(huge.data()), -ExactProduct(FLT_MAX, FLT_MAX));
  EXPECT_EQ(ExactToFloat(huge.data()), -std::numeric_limits<float>::infinity());
}

TEST(ExactSumTest, FloatSubnormalTies) {
  // 2^-150 is half the smallest subnormal: a tie between 0 (even) and 2^-149.
  Words w = Zero();
  ExactAddProduct(w.data(), 0x1p-149f, 0.5f);
  EXPECT_EQ(ExactToFloat(w.data()), 0.0f);
  ExactAddProduct(w.data(), 0x1p-149f, 1.0f);  // 1.5 * 2^-149: tie, to 2^-148 (even)
  EXPECT_EQ(ExactToFloat(w.data()), 0x1p-148f);
  ExactAddProduct(w.data(), 0x1p-149f, 0x1p-149f);  // just above 1.5 * 2^-149
  EXPECT_EQ(ExactToFloat(w.data()), 0x1p-148f);
  Words v = Zero();
  ExactAddProduct(v.data(), 0x1p-149f, 2.5f);  // 2.5 * 2^-149: tie, to 2 * 2^-149
  EXPECT_EQ(ExactToFloat(v.data()), 0x1p-148f);
  ExactAddProduct(v.data(), -0x1p-149f, 0x1p-149f);  // just below: still 2^-148
  EXPECT_EQ(ExactToFloat(v.data()), 0x1p-148f);
  // Subnormal float terms: 3 * 2^-149 + the largest subnormal = FLT_MIN + 2^-148.
  Words subnormals = Zero();
  for (int i = 0; i < 3; ++i) ExactAddFloat(subnormals.data(), 0x1p-149f);
  EXPECT_EQ(subnormals[4], 3 << 21);  // 2^-149 is accumulator bit 149 = word 4, bit 21
  ExactAddFloat(subnormals.data(), 0x1.fffffcp-127f);
  EXPECT_EQ(ExactToFloat(subnormals.data()), FLT_MIN + 0x1p-148f);
  EXPECT_EQ(ExactToDouble(subnormals.data()), static_cast<double>(FLT_MIN) + 0x1p-148);
  // The largest subnormal plus half an ulp rounds up to FLT_MIN (even).
  Words top = Zero();
  ExactAddFloat(top.data(), 0x1.fffffcp-127f);
  ExactAddProduct(top.data(), 0x1p-149f, 0.5f);
  EXPECT_EQ(ExactToFloat(top.data()), FLT_MIN);
}

TEST(ExactSumTest, FloatOverflowThreshold) {
  const float half_ulp = 0x1p103f;  // half of FLT_MAX's ulp
  Words w = Zero();
  ExactAddFloat(w.data(), FLT_MAX);
  ExactAddFloat(w.data(), half_ulp);
  EXPECT_EQ(ExactToFloat(w.data()), std::numeric_limits<float>::infinity());  // tie; FLT_MAX is odd
  EXPECT_EQ(ExactToDouble(w.data()), static_cast<double>(FLT_MAX) + 0x1p103);
  ExactAddProduct(w.data(), -0x1p-149f, 0x1p-149f);  // a hair below the threshold
  EXPECT_EQ(ExactToFloat(w.data()), FLT_MAX);
  Words negative = Zero();
  ExactAddFloat(negative.data(), -FLT_MAX);
  ExactAddFloat(negative.data(), -FLT_MAX);
  EXPECT_EQ(ExactToFloat(negative.data()), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(ExactToDouble(negative.data()), -2.0 * FLT_MAX);
}

TEST(ExactSumTest, DoubleExactAndTies) {
  // Integers k * 2^-10 below 2^20: every partial sum is exact in double.
  std::mt19937 rng(5);
  Words w = Zero();
  double sum = 0;
  for (int i = 0; i < 1000; ++i) {
    const float x = std::ldexp(static_cast<float>(static_cast<int>(rng() % (1 << 20)) - (1 << 19)), -10);
    ExactAddFloat(w.data(), x);
    sum += x;
  }
  EXPECT_EQ(ExactToDouble(w.data()), sum);
  EXPECT_EQ(ExactToFloat(w.data()), static_cast<float>(sum));  // one rounding of the exact value

  // 1 + 2^-53 ties to 1; 1 + 2^-52 + 2^-53 ties to 1 + 2^-51.
  Words tie = Zero();
  ExactAddFloat(tie.data(), 1), ExactAddFloat(tie.data(), 0x1p-53f);
  EXPECT_EQ(ExactToDouble(tie.data()), 1.0);
  ExactAddFloat(tie.data(), 0x1p-52f);
  EXPECT_EQ(ExactToDouble(tie.data()), 1 + 0x1p-51);
  ExactAddProduct(tie.data(), -0x1p-149f, 0x1p-149f);  // just below the tie
  EXPECT_EQ(ExactToDouble(tie.data()), 1 + 0x1p-52);
}

TEST(ExactSumTest, NonFiniteTerms) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto sum = [](std::initializer_list<Term> terms) { return SumOf(std::vector<Term>(terms)); };
  Words w = sum({{1, 1, false}, {nan, 1, false}});
  EXPECT_TRUE(std::isnan(ExactToFloat(w.data())));
  EXPECT_TRUE(std::isnan(ExactToDouble(w.data())));
  EXPECT_FALSE(ExactIsZero(w.data()));
  EXPECT_EQ(w[kExactDigitWords], kExactNanUnit);

  w = sum({{inf, 1, false}, {-5, 1, false}, {FLT_MAX, FLT_MAX, true}});
  EXPECT_EQ(ExactToFloat(w.data()), inf);
  EXPECT_EQ(ExactToDouble(w.data()), static_cast<double>(inf));
  w = sum({{-inf, 1, false}, {FLT_MAX, 1, false}, {-inf, 1, false}});
  EXPECT_EQ(ExactToFloat(w.data()), -inf);
  EXPECT_EQ(w[kExactDigitWords], 2 * kExactNegInfUnit);
  w = sum({{inf, 1, false}, {-inf, 1, false}});
  EXPECT_TRUE(std::isnan(ExactToFloat(w.data())));
  // Products: inf * 0 is NaN, inf * -2 is -inf, NaN * 0 is NaN.
  w = sum({{inf, 0, true}});
  EXPECT_TRUE(std::isnan(ExactToFloat(w.data())));
  w = sum({{inf, -2, true}, {3, 4, true}});
  EXPECT_EQ(ExactToFloat(w.data()), -inf);
  EXPECT_EQ(w[kExactDigitWords], kExactNegInfUnit);
  w = sum({{0, nan, true}});
  EXPECT_TRUE(std::isnan(ExactToDouble(w.data())));
  // Merging a +inf accumulator with a -inf one gives NaN; with a finite one, +inf.
  Words pos = sum({{inf, 1, false}}), neg = sum({{-1, inf, true}}), finite = sum({{7, 1, false}});
  Words merged = pos;
  ExactMerge(merged.data(), finite.data());
  EXPECT_EQ(ExactToFloat(merged.data()), inf);
  ExactMerge(merged.data(), neg.data());
  EXPECT_TRUE(std::isnan(ExactToFloat(merged.data())));
  // Normalize leaves the count word alone.
  EXPECT_EQ(Normalized(merged)[kExactDigitWords], merged[kExactDigitWords]);
}

// 2^20 copies of one term, which puts up to 2^20 * (2^32 - 1) into a digit word
// before any normalization: the carry room at work.
TEST(ExactSumTest, CarryRoomHoldsManyLargeTerms) {
  constexpr int kCopies = 1 << 20;
  // A 24-bit significand whose shift puts its lsb at bit 31 of a word: both words it
  // touches get nearly 2^32 - 1 per add.
  const float worst = std::ldexp(static_cast<float>(0xffffff), 139 - 150);
  const std::vector<std::pair<Term, double>> cases = {
      {{FLT_MAX, 1, false}, static_cast<double>(FLT_MAX) * kCopies},
      {{-worst, 1, false}, -static_cast<double>(worst) * kCopies},
      {{-FLT_MAX, FLT_MAX, true}, -ExactProduct(FLT_MAX, FLT_MAX) * kCopies},
      {{0x1.fffffep-1f, -0x1.fffffep-100f, true}, ExactProduct(0x1.fffffep-1f, -0x1.fffffep-100f) * kCopies},
  };
  for (const auto& [term, expected] : cases) {
    Words w = Zero();
    for (int i = 0; i < kCopies; ++i) term.AddTo(w.data());
    Reference exact = Reference::OfDouble(term.Value());
    for (int doubling = 0; doubling < 20; ++doubling) exact = exact + exact;  // * 2^20
    EXPECT_EQ(ExactToDouble(w.data()), expected);                             // exact: 2^20 * x is a double
    EXPECT_EQ(Reference::OfWords(w.data()), exact);
    EXPECT_EQ(CheckRoundings(w.data(), exact), "");
  }
}

TEST(ExactSumTest, AddDoubleTakesMultiplesOfTheLsbUpTo2To300) {
  // Every term below is a multiple of 2^-298 with |x| < 2^300.
  const std::vector<double> values = {0x1p-298,
                                      -0x1.fffffffffffffp-246,
                                      0x1.23456789abcdep+100,
                                      0x1.fffffffffffffp+299,
                                      -0x1.0000000000001p+299,
                                      0x1.8p+277,
                                      0x1p+278,
                                      -0x1.fffffffffffffp+277,
                                      0.0,
                                      -0.0};
  Words w = Zero();
  Reference exact;
  for (double x : values) {
    ExactAddDouble(w.data(), x);
    exact.AddDouble(x);
    EXPECT_EQ(Reference::OfWords(w.data()), exact) << std::hexfloat << x;
    EXPECT_EQ(CheckRoundings(w.data(), exact), "") << std::hexfloat << x;
    Words single = Zero();
    ExactAddDouble(single.data(), x);
    EXPECT_EQ(ExactToDouble(single.data()), x == 0 ? 0.0 : x);  // one exact double comes back as itself
  }
  for (double x : values) ExactAddDouble(w.data(), -x);
  EXPECT_TRUE(ExactIsZero(w.data()));
  // A float added as a double gives the same words as ExactAddFloat.
  Words as_float = Zero(), as_double = Zero();
  for (float x : {0x1p-149f, -1.5f, FLT_MAX, 0x1.fffffcp-127f}) {
    ExactAddFloat(as_float.data(), x);
    ExactAddDouble(as_double.data(), x);
  }
  EXPECT_EQ(as_float, as_double);
}

RC_GTEST_PROP(ExactSumProperty, AddDoubleMatchesTheReference, ()) {
  // Random doubles whose lsb is at or above 2^-298, up to just below 2^300.
  const auto count = *rc::gen::inRange(1, 20);
  Words w = Zero();
  Reference exact;
  for (int i = 0; i < count; ++i) {
    const std::uint64_t significand =
        (*rc::gen::resize(rc::kNominalSize, rc::gen::arbitrary<std::uint64_t>()) >> 11) | (std::uint64_t{1} << 52);
    const int exponent = *rc::gen::resize(rc::kNominalSize, rc::gen::inRange(-298 + 52, 300));
    const double x =
        (*rc::gen::arbitrary<bool>() ? -1.0 : 1.0) * std::ldexp(static_cast<double>(significand), exponent - 52);
    ExactAddDouble(w.data(), x);
    exact.AddDouble(x);
  }
  RC_ASSERT(Reference::OfWords(w.data()) == exact);
  RC_ASSERT(CheckRoundings(w.data(), exact) == "");
}

TEST(ExactSumTest, BulkFormsMatchTheSingleOnes) {
  constexpr int kCount = 257;
  std::vector<std::int64_t> words(kCount * kExactWords, 0);
  std::mt19937 rng(11);
  for (int i = 0; i < kCount; ++i) {
    for (int j = 0; j < i % 7; ++j) {
      ExactAddProduct(&words[i * kExactWords], std::bit_cast<float>(static_cast<std::uint32_t>(rng()) & 0xbfffffffu),
                      std::bit_cast<float>(static_cast<std::uint32_t>(rng()) & 0xbfffffffu));
    }
  }
  std::vector<float> out(kCount);
  ExactToFloats(words, out);
  std::vector<std::int64_t> normalized = words;
  ExactNormalizeAll(normalized);
  for (int i = 0; i < kCount; ++i) {
    EXPECT_EQ(std::bit_cast<std::uint32_t>(out[i]),
              std::bit_cast<std::uint32_t>(ExactToFloat(&words[i * kExactWords])));
    Words one;
    std::copy_n(&words[i * kExactWords], kExactWords, one.begin());
    Words one_normalized;
    std::copy_n(&normalized[i * kExactWords], kExactWords, one_normalized.begin());
    EXPECT_EQ(one_normalized, Normalized(one));
  }
}

TEST(ExactSumTest, ExactSumClass) {
  ExactSum a, b;
  EXPECT_EQ(a.ToFloat(), 0.0f);
  a.Add(0x1p-149f), a.Add(1e30f), a.AddProduct(3, -0x1p-149f);
  b.AddProduct(1e15f, 1e15f), b.Add(-1e30f);
  ExactSum merged = a;
  merged.Merge(b);
  Reference exact = Reference::OfDouble(0x1p-149) + Reference::OfDouble(1e30f) +
                    Reference::OfDouble(ExactProduct(3, -0x1p-149f)) + Reference::OfDouble(ExactProduct(1e15f, 1e15f)) +
                    Reference::OfDouble(-1e30f);
  EXPECT_EQ(CheckRoundings(merged.data(), exact), "");
  EXPECT_EQ(merged.ToFloat(), ExactToFloat(merged.data()));
  EXPECT_EQ(merged.ToDouble(), ExactToDouble(merged.data()));
  // Same terms in another grouping: equal.
  ExactSum other;
  other.Add(-1e30f), other.AddProduct(1e15f, 1e15f), other.AddProduct(3, -0x1p-149f), other.Add(1e30f);
  other.Add(0x1p-149f);
  EXPECT_TRUE(other == merged);
  EXPECT_FALSE(other == a);
  // Words round-trip through SetWords (normalized or not).
  ExactSum restored;
  const std::array<std::int64_t, kExactWords> raw = [&] {
    std::array<std::int64_t, kExactWords> r;
    std::copy_n(merged.data(), kExactWords, r.begin());
    return r;
  }();
  restored.SetWords(raw);
  EXPECT_TRUE(restored == merged);
  EXPECT_EQ(restored.Words(), merged.Words());
  restored.Reset();
  EXPECT_TRUE(ExactIsZero(restored.data()));

  // Words at the edge of the carry room (2^62 in every digit word below the top, as
  // after 2^30 adds) are normalized on restore, so merging them still fits.
  std::array<std::int64_t, kExactWords> full;
  full.fill(std::int64_t{1} << 62);
  full[kExactDigitWords - 1] = 0, full[kExactDigitWords] = 0;
  const Reference full_value = Reference::OfWords(full.data());
  ExactSum big;
  big.SetWords(full);
  const ExactSum copy = big;
  big.Merge(copy), big.Merge(copy);
  EXPECT_EQ(Reference::OfWords(big.data()), full_value + full_value + full_value);
}

}  // namespace
}  // namespace dtlab
