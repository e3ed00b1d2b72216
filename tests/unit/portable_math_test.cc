// Tests of core/portable_math.h: Exp and Log correctly rounded (the contract is 1 ulp;
// checked against the C library in double precision) over a strided sample of all
// float bit patterns and dense windows where the edge cases live, their special
// values, SoftmaxCrossEntropyRow against a double-precision reference, and golden
// bits that the CUDA replay must reproduce.
#include "core/portable_math.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace dtlab::portable {
namespace {

constexpr float kInfinity = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr double kFloatEpsilon = 0x1p-24;  // unit roundoff of float

std::uint32_t Bits(float x) { return std::bit_cast<std::uint32_t>(x); }
float FromBits(std::uint32_t bits) { return std::bit_cast<float>(bits); }

// How far `got` is from `exact` in units of the float ulp of exact's binade (2^-149
// among the subnormals). `exact` is the C library's double result, which is within
// ~2^-52 relative of the true value: 2^-29 of a float ulp, far below what matters.
double UlpError(float got, double exact) {
  if (static_cast<float>(exact) == kInfinity || got == kInfinity)
    return static_cast<float>(exact) == got ? 0.0 : std::numeric_limits<double>::infinity();
  int exponent = 0;
  std::frexp(exact, &exponent);  // |exact| in [2^(exponent-1), 2^exponent)
  const double ulp = std::ldexp(1.0, std::max(exponent - 1, -126) - 23);
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

// True if `exact` (the C library's double result, within ~2^-52 of the true value
// relative to it) is far enough from every midpoint between two floats that
// rounding it to float gives the correctly rounded result.
bool RoundsDecisively(double exact) {
  const float nearest = static_cast<float>(exact);
  if (std::isinf(nearest)) return true;
  const double below = 0.5 * (static_cast<double>(nearest) + std::nextafter(nearest, -kInfinity));
  const double above = 0.5 * (static_cast<double>(nearest) + std::nextafter(nearest, kInfinity));
  const double margin = std::fabs(exact) * 0x1p-48;
  return std::fabs(exact - below) > margin && std::fabs(exact - above) > margin;
}

// Checks `function` against `reference` at x; tracks the worst error and how many
// results are not correctly rounded (where the reference can tell).
struct AccuracyTally {
  double max_ulp = 0;
  float worst_input = 0;
  std::int64_t checked = 0;
  std::int64_t not_correctly_rounded = 0;

  template <class Function, class Reference>
  void Check(float x, Function function, Reference reference) {
    const float got = function(x);
    const double exact = reference(static_cast<double>(x));
    ++checked;
    if (RoundsDecisively(exact) && Bits(got) != Bits(static_cast<float>(exact))) ++not_correctly_rounded;
    const double error = UlpError(got, exact);
    if (!(error <= max_ulp)) {
      max_ulp = error;
      worst_input = x;
    }
  }
};

// The contract is 1 ulp; the implementation does better (an exhaustive run found
// every result correctly rounded), and a change that loses that is worth noticing.
void ExpectAccurate(const AccuracyTally& tally, const char* name) {
  EXPECT_LT(tally.max_ulp, 1.0) << name << " worst at " << std::hexfloat << tally.worst_input;
  EXPECT_EQ(tally.not_correctly_rounded, 0) << name << " of " << tally.checked;
}

double ReferenceExp(double x) { return std::exp(x); }
double ReferenceLog(double x) { return std::log(x); }

// Every float whose bits lie in [first, last] (a range of one sign), step `stride`.
template <class Visit>
void ForEachBitPattern(std::uint32_t first, std::uint32_t last, std::uint32_t stride, Visit visit) {
  for (std::uint64_t bits = first; bits <= last; bits += stride) visit(FromBits(static_cast<std::uint32_t>(bits)));
}

// All 2^32 bit patterns at a prime stride, so every low-bit residue of the
// significand is visited; NaNs must give NaN.
TEST(PortableExp, CorrectlyRoundedOnStridedBitPatterns) {
  AccuracyTally tally;
  for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << 32); bits += 1031) {
    const float x = FromBits(static_cast<std::uint32_t>(bits));
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(Exp(x))) << std::hex << bits;
      continue;
    }
    tally.Check(x, Exp, ReferenceExp);
  }
  ExpectAccurate(tally, "Exp");
}

// Densely where Exp is neither 0, 1 nor inf: x in [-104, -2^-26] and [2^-26, 89].
TEST(PortableExp, CorrectlyRoundedOnItsNontrivialRange) {
  AccuracyTally tally;
  ForEachBitPattern(Bits(0x1p-26f), Bits(89.0f), 101, [&](float x) { tally.Check(x, Exp, ReferenceExp); });
  ForEachBitPattern(Bits(-0x1p-26f), Bits(-104.0f), 101, [&](float x) { tally.Check(x, Exp, ReferenceExp); });
  ExpectAccurate(tally, "Exp");
}

// Every float in [88, 89] (overflow) and [-104, -103] (the last nonzero results),
// and every 7th in [-104, -87] (subnormal results).
TEST(PortableExp, CorrectlyRoundedAtEveryInputNearOverflowAndUnderflow) {
  AccuracyTally tally;
  ForEachBitPattern(Bits(88.0f), Bits(89.0f), 1, [&](float x) { tally.Check(x, Exp, ReferenceExp); });
  ForEachBitPattern(Bits(-87.0f), Bits(-104.0f), 7, [&](float x) { tally.Check(x, Exp, ReferenceExp); });
  ForEachBitPattern(Bits(-103.0f), Bits(-104.0f), 1, [&](float x) { tally.Check(x, Exp, ReferenceExp); });
  ExpectAccurate(tally, "Exp");
}

TEST(PortableExp, SpecialValues) {
  EXPECT_TRUE(std::isnan(Exp(kNan)));
  EXPECT_TRUE(std::isnan(Exp(-kNan)));
  EXPECT_EQ(Bits(Exp(-kInfinity)), Bits(0.0f));
  EXPECT_EQ(Exp(kInfinity), kInfinity);
  EXPECT_EQ(Exp(0.0f), 1.0f);
  EXPECT_EQ(Exp(-0.0f), 1.0f);
  EXPECT_EQ(Exp(0x1p-30f), 1.0f);
  EXPECT_EQ(Exp(-0x1p-30f), 1.0f);
  EXPECT_EQ(Exp(FromBits(1)), 1.0f);  // the smallest subnormal input
  // ln(FLT_MAX) = 88.7228391...: the float just below it is the largest input with
  // a finite result, the one just above the smallest that overflows.
  EXPECT_EQ(Exp(0x1.62e42ep+6f), 0x1.ffff08p+127f);
  EXPECT_EQ(Exp(0x1.62e430p+6f), kInfinity);
  EXPECT_EQ(Exp(100.0f), kInfinity);
  EXPECT_EQ(Exp(std::numeric_limits<float>::max()), kInfinity);
  // Subnormal results, and ln(2^-150) = -103.9720770...: the float just above it
  // gives the smallest subnormal, the one just below rounds to 0.
  EXPECT_EQ(Exp(-100.0f), 0x1.bp-145f);  // e^-100 = 26.55 * 2^-149
  EXPECT_EQ(Exp(-0x1.9fe368p+6f), FromBits(1));
  EXPECT_EQ(Bits(Exp(-0x1.9fe36ap+6f)), Bits(0.0f));
  EXPECT_EQ(Bits(Exp(-104.5f)), Bits(0.0f));
  EXPECT_EQ(Bits(Exp(-std::numeric_limits<float>::max())), Bits(0.0f));
}

TEST(PortableLog, CorrectlyRoundedOnStridedBitPatterns) {
  AccuracyTally tally;
  for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << 32); bits += 1031) {
    const float x = FromBits(static_cast<std::uint32_t>(bits));
    if (std::isnan(x) || x < 0.0f) {
      ASSERT_TRUE(std::isnan(Log(x))) << std::hex << bits;
      continue;
    }
    tally.Check(x, Log, ReferenceLog);
  }
  ExpectAccurate(tally, "Log");
}

// Every positive finite float (subnormals included) at a prime stride.
TEST(PortableLog, CorrectlyRoundedOnPositiveFloats) {
  AccuracyTally tally;
  ForEachBitPattern(1, Bits(std::numeric_limits<float>::max()), 199,
                    [&](float x) { tally.Check(x, Log, ReferenceLog); });
  ExpectAccurate(tally, "Log");
}

// Every float near 1, where the result is small and relative accuracy is hardest,
// every float in [1.4, 1.42] around the sqrt(2) switch of the reduction, and the
// smallest subnormals.
TEST(PortableLog, CorrectlyRoundedAtEveryInputNearOneAndTheRangeSwitch) {
  AccuracyTally tally;
  ForEachBitPattern(Bits(1.0f - 0x1p-10f), Bits(1.0f + 0x1p-10f), 1,
                    [&](float x) { tally.Check(x, Log, ReferenceLog); });
  ForEachBitPattern(Bits(1.4f), Bits(1.42f), 1, [&](float x) { tally.Check(x, Log, ReferenceLog); });
  ForEachBitPattern(1, 100000, 1, [&](float x) { tally.Check(x, Log, ReferenceLog); });
  ExpectAccurate(tally, "Log");
}

TEST(PortableLog, SpecialValues) {
  EXPECT_TRUE(std::isnan(Log(kNan)));
  EXPECT_TRUE(std::isnan(Log(-kNan)));
  EXPECT_TRUE(std::isnan(Log(-1.0f)));
  EXPECT_TRUE(std::isnan(Log(-FromBits(1))));
  EXPECT_TRUE(std::isnan(Log(-kInfinity)));
  EXPECT_EQ(Log(0.0f), -kInfinity);
  EXPECT_EQ(Log(-0.0f), -kInfinity);
  EXPECT_EQ(Log(kInfinity), kInfinity);
  EXPECT_EQ(Bits(Log(1.0f)), Bits(0.0f));
  EXPECT_EQ(Log(FromBits(1)), -0x1.9d1dap+6f);  // ln(2^-149) = -103.278929903...
  EXPECT_EQ(Log(std::numeric_limits<float>::max()), 0x1.62e43p+6f);
  EXPECT_EQ(Log(std::numeric_limits<float>::min()), -0x1.5d58ap+6f);
  EXPECT_EQ(Log(1.0f + 0x1p-23f), 0x1.fffffep-24f);  // ln(1 + u) = u - u^2/2 + ...
  EXPECT_EQ(Log(1.0f - 0x1p-24f), -0x1p-24f);
}

// Exp and Log recover each other to within the rounding the composition implies.
RC_GTEST_PROP(PortableMathProperty, LogOfExpIsNearTheInput, ()) {
  const float x = static_cast<float>(*rc::gen::inRange(-8600000, 8600000)) * 1e-5f;  // [-86, 86]
  const float round_trip = Log(Exp(x));
  RC_ASSERT(std::fabs(round_trip - x) <= 2e-7f * std::max(1.0f, std::fabs(x)) + 0x1p-24f);
}

RC_GTEST_PROP(PortableMathProperty, ExpAndLogAreMonotonic, ()) {
  const std::uint32_t a = *rc::gen::inRange<std::uint32_t>(0, 0x7f800000u);
  const std::uint32_t b = *rc::gen::inRange<std::uint32_t>(a, 0x7f800001u);
  RC_ASSERT(Log(FromBits(a)) <= Log(FromBits(b)));
  RC_ASSERT(Exp(FromBits(a)) <= Exp(FromBits(b)));
  RC_ASSERT(Exp(-FromBits(a)) >= Exp(-FromBits(b)));
}

// The softmax cross-entropy of one row in double precision, the reference.
struct RowResult {
  double loss = 0;
  std::vector<double> dlogits;
};

RowResult ReferenceRow(const std::vector<float>& logits, int label, double coefficient) {
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (const float z : logits) sum += std::exp(z - max_logit);
  RowResult result;
  result.loss = std::log(sum) - (logits[static_cast<std::size_t>(label)] - max_logit);
  for (std::size_t c = 0; c < logits.size(); ++c)
    result.dlogits.push_back(coefficient * (std::exp(logits[c] - max_logit) / sum - (static_cast<int>(c) == label)));
  return result;
}

// Compares the float row to the reference within bounds derived from the float
// computation's own roundings (a few ulps of the terms involved, in units of the
// float unit roundoff u): shifting rounds each logit by u|z - m|, each Exp by u,
// the sum of n terms (the largest exactly 1) by n u relative, Log and the final
// subtraction by u of their magnitudes. The bounds are doubled for slack. Returns
// what differs, or "" if nothing does (usable from TEST and RC_GTEST_PROP alike).
std::string RowMismatch(const std::vector<float>& logits, int label, float coefficient) {
  const int classes = static_cast<int>(logits.size());
  float loss = 0;
  std::vector<float> dlogits(logits.size());
  SoftmaxCrossEntropyRow(logits.data(), classes, label, coefficient, &loss, dlogits.data());
  const RowResult reference = ReferenceRow(logits, label, coefficient);
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  const double shifted_label = logits[static_cast<std::size_t>(label)] - max_logit;
  const double log_sum = reference.loss + shifted_label;
  const double loss_bound =
      2 * kFloatEpsilon * (2 * classes + std::fabs(log_sum) + std::fabs(shifted_label) + std::fabs(reference.loss));
  std::ostringstream mismatch;
  mismatch << std::setprecision(9);
  if (!(std::fabs(loss - reference.loss) <= loss_bound))
    mismatch << "loss " << loss << " vs " << reference.loss << " (bound " << loss_bound << "); ";
  for (int c = 0; c < classes; ++c) {
    const double probability = reference.dlogits[static_cast<std::size_t>(c)] / coefficient + (c == label);
    const double shifted = logits[static_cast<std::size_t>(c)] - max_logit;
    const double bound =
        2 * std::fabs(coefficient) * kFloatEpsilon *
            (probability * (2 * classes + 2 + std::fabs(shifted)) + std::fabs(probability - (c == label))) +
        std::fabs(coefficient) * 0x1p-126;  // subnormal probabilities round absolutely
    const double got = dlogits[static_cast<std::size_t>(c)], want = reference.dlogits[static_cast<std::size_t>(c)];
    if (!(std::fabs(got - want) <= bound))
      mismatch << "dlogits[" << c << "] " << got << " vs " << want << " (bound " << bound << "); ";
  }
  return mismatch.str();
}

TEST(PortableSoftmaxCrossEntropy, MatchesDoubleReference) {
  EXPECT_EQ(RowMismatch({0.5f, -1.25f, 3.0f, 2.75f, -0.125f, 1.0f, -2.5f, 0.0f, 1.5f, -0.75f}, 3, 1.0f / 32), "");
  EXPECT_EQ(RowMismatch({0.5f, -1.25f, 3.0f, 2.75f, -0.125f, 1.0f, -2.5f, 0.0f, 1.5f, -0.75f}, 6, 1.0f), "");
  EXPECT_EQ(RowMismatch({7.0f}, 0, 0.25f), "");
  EXPECT_EQ(RowMismatch({-40.0f, 40.0f}, 0, 1.0f), "");
  EXPECT_EQ(RowMismatch({-40.0f, 40.0f}, 1, -3.0f), "");
  EXPECT_EQ(RowMismatch({100.0f, 100.0f, 100.0f, 100.0f}, 2, 1.0f), "");
}

TEST(PortableSoftmaxCrossEntropy, HugeLogitsDoNotOverflow) {
  const float logits[3] = {1e30f, -1e30f, 0.0f};
  float loss = -1;
  float dlogits[3];
  SoftmaxCrossEntropyRow(logits, 3, 0, 0.5f, &loss, dlogits);
  EXPECT_EQ(loss, 0.0f);
  EXPECT_EQ(dlogits[0], 0.0f);
  EXPECT_EQ(dlogits[1], 0.0f);
  EXPECT_EQ(dlogits[2], 0.0f);
  SoftmaxCrossEntropyRow(logits, 3, 1, 0.5f, &loss, dlogits);
  EXPECT_EQ(loss, 2e30f);
  EXPECT_EQ(dlogits[0], 0.5f);
  EXPECT_EQ(dlogits[1], -0.5f);
  EXPECT_EQ(dlogits[2], 0.0f);
  // The shift itself overflows to -inf here; Exp(-inf) = 0 keeps the sum finite.
  const float extreme[2] = {3e38f, -3e38f};
  SoftmaxCrossEntropyRow(extreme, 2, 1, 1.0f, &loss, dlogits);
  EXPECT_EQ(loss, kInfinity);
  EXPECT_EQ(dlogits[0], 1.0f);
  EXPECT_EQ(dlogits[1], -1.0f);
}

TEST(PortableSoftmaxCrossEntropy, EqualLogitsGiveLogOfClassCount) {
  const std::vector<float> logits(10, -3.5f);
  float loss = 0;
  std::vector<float> dlogits(10);
  SoftmaxCrossEntropyRow(logits.data(), 10, 4, 1.0f, &loss, dlogits.data());
  EXPECT_EQ(loss, Log(10.0f));
  for (int c = 0; c < 10; ++c) EXPECT_EQ(dlogits[static_cast<std::size_t>(c)], c == 4 ? 0.1f - 1.0f : 0.1f);
}

TEST(PortableSoftmaxCrossEntropy, NanLogitPoisonsEverything) {
  for (int nan_at = 0; nan_at < 4; ++nan_at) {
    std::vector<float> logits = {1.0f, 5.0f, -2.0f, 0.5f};
    logits[static_cast<std::size_t>(nan_at)] = kNan;
    float loss = 0;
    std::vector<float> dlogits(4);
    SoftmaxCrossEntropyRow(logits.data(), 4, 1, 1.0f, &loss, dlogits.data());
    EXPECT_TRUE(std::isnan(loss)) << nan_at;
    for (const float g : dlogits) EXPECT_TRUE(std::isnan(g)) << nan_at;
  }
}

TEST(PortableSoftmaxCrossEntropy, NullGradientComputesLossOnly) {
  const float logits[4] = {0.25f, -1.0f, 2.0f, 0.0f};
  float with_gradient = 0, without_gradient = 0;
  float dlogits[4];
  SoftmaxCrossEntropyRow(logits, 4, 2, 1.0f, &with_gradient, dlogits);
  SoftmaxCrossEntropyRow(logits, 4, 2, 1.0f, &without_gradient, nullptr);
  EXPECT_EQ(Bits(with_gradient), Bits(without_gradient));
}

// Random rows: within the reference bounds, loss >= 0, gradient rows sum to ~0,
// the label's gradient is the only negative one, and moving the label changes the
// loss by the difference of the two logits.
RC_GTEST_PROP(PortableSoftmaxCrossEntropyProperty, RandomRowsBehave, ()) {
  const int classes = *rc::gen::inRange(1, 40);
  const float scale = *rc::gen::element(0.01f, 1.0f, 10.0f, 100.0f, 1e30f);
  const auto ticks =
      *rc::gen::container<std::vector<int>>(static_cast<std::size_t>(classes), rc::gen::inRange(-10000, 10001));
  std::vector<float> logits;
  for (const int t : ticks) logits.push_back(scale * (static_cast<float>(t) / 1000.0f));
  const int label = *rc::gen::inRange(0, classes);
  const float coefficient = *rc::gen::element(1.0f, 0.5f, 1.0f / 128, -2.0f);

  RC_ASSERT(RowMismatch(logits, label, coefficient) == "");

  float loss = 0;
  std::vector<float> dlogits(static_cast<std::size_t>(classes));
  SoftmaxCrossEntropyRow(logits.data(), classes, label, coefficient, &loss, dlogits.data());
  RC_ASSERT(loss >= 0.0f);
  double gradient_sum = 0;
  for (int c = 0; c < classes; ++c) {
    const float g = dlogits[static_cast<std::size_t>(c)];
    gradient_sum += g;
    if (c != label)
      RC_ASSERT(g * coefficient >= 0.0f);
    else
      RC_ASSERT(g * coefficient <= 0.0f);
  }
  RC_ASSERT(std::fabs(gradient_sum) <= std::fabs(coefficient) * 4 * (classes + 1) * kFloatEpsilon);

  const int other = *rc::gen::inRange(0, classes);
  float other_loss = 0;
  SoftmaxCrossEntropyRow(logits.data(), classes, other, coefficient, &other_loss, nullptr);
  const double expected_difference =
      static_cast<double>(logits[static_cast<std::size_t>(label)]) - logits[static_cast<std::size_t>(other)];
  RC_ASSERT(std::fabs((other_loss - loss) - expected_difference) <=
            4 * kFloatEpsilon * (std::fabs(loss) + std::fabs(other_loss) + 2 * classes));
}

// Golden bits, which exact mode and the CUDA replay must reproduce. All of them are
// the correctly rounded values (checked against 300-bit mpmath). Every result of Exp
// and Log is correctly rounded with margin to spare: exhaustive comparisons found
// the same bits for all 2^32 inputs when the build contracts a*b+c into FMAs and
// when ln 2 is not split, so small changes to the arithmetic change nothing. A
// change that does change bits loses correct rounding, which shows first where the
// exact value lies closest to a midpoint between two floats. So after a few
// ordinary inputs each list holds the closest such inputs in all of float, with the
// relative distance of the exact value from the midpoint.
struct Golden {
  std::uint32_t input;
  std::uint32_t output;
};

TEST(PortableMath, ExpGoldenBits) {
  constexpr Golden kGolden[] = {
      {0x3f800000, 0x402df854},  // e^1
      {0xc2af0000, 0x006cb2bc},  // e^-87.5, just below FLT_MIN
      {0xc2c80000, 0x0000001b},  // e^-100 = 27 * 2^-149, subnormal
      {0x42b10000, 0x7f4cdcc4},  // e^88.5
      {0x3f000000, 0x3fd3094c},  // e^0.5
      {0xc16912cd, 0x34fd331b},  // -0x1.d2259ap+3, 2^-52.6 from a midpoint
      {0xbbf0edf1, 0x3f7e1fe9},  // -0x1.e1dbe2p-8, 2^-51.7 from a midpoint
      {0xbae0e25c, 0x3f7f8fa7},  // -0x1.c1c4b8p-10, 2^-51.2 from a midpoint
      {0x377eff81, 0x3f800080},  // 0x1.fdff02p-17, 2^-50.6 from a midpoint
      {0x40315b33, 0x417fa47d},  // 0x1.62b666p+1, 2^-50.5 from a midpoint
      {0x4001b249, 0x40f2cd14},  // 0x1.036492p+1, 2^-50.3 from a midpoint
      {0x39c6be5b, 0x3f800c6d},  // 0x1.8d7cb6p-12, 2^-50.0 from a midpoint
      {0x38e69cc1, 0x3f80039a},  // 0x1.cd3982p-14, 2^-49.9 from a midpoint
      {0x383a3ef1, 0x3f800175},  // 0x1.747de2p-15, 2^-49.8 from a midpoint
      {0xbc2a461a, 0x3f7d5a6e},  // -0x1.548c34p-7, 2^-49.7 from a midpoint
      {0x3d1a274e, 0x3f84e8ba},  // 0x1.344e9cp-5, 2^-49.7 from a midpoint
      {0x4288942b, 0x70b7a4c5},  // 0x1.112856p+6, 2^-49.6 from a midpoint
  };
  for (const Golden& golden : kGolden)
    EXPECT_EQ(Bits(Exp(FromBits(golden.input))), golden.output) << std::hexfloat << FromBits(golden.input);
}

TEST(PortableMath, LogGoldenBits) {
  constexpr Golden kGolden[] = {
      {0x40400000, 0x3f8c9f54},  // log 3
      {0x000116c2, 0xc2b834f2},  // log 1e-40f, a subnormal input
      {0x41200000, 0x40135d8e},  // log 10
      {0x3f400000, 0xbe934b11},  // log 0.75
      {0x65d890d3, 0x4254d1f9},  // 0x1.b121a6p+76, 2^-57.8 from a midpoint
      {0x4c5d65a5, 0x418f034b},  // 0x1.bacb4ap+25, 2^-56.7 from a midpoint
      {0x4d604ebe, 0x419a352c},  // 0x1.c09d7cp+27, 2^-56.0 from a midpoint
      {0x66a8c860, 0x42595e46},  // 0x1.5190cp+78, 2^-54.9 from a midpoint
      {0x1f116ab8, 0xc233b53e},  // 0x1.22d57p-65, 2^-54.6 from a midpoint
      {0x41178feb, 0x400fe5e7},  // 0x1.2f1fd6p+3, 2^-54.6 from a midpoint
      {0x3c413d3a, 0xc08e158f},  // 0x1.827a74p-7, 2^-53.9 from a midpoint
      {0x6f31a8ec, 0x42845a89},  // 0x1.6351d8p+95, 2^-53.2 from a midpoint
      {0x38dcbe38, 0xc1128ba4},  // 0x1.b97c7p-14, 2^-53.1 from a midpoint
      {0x5ee8984e, 0x422e4a21},  // 0x1.d1309cp+62, 2^-52.8 from a midpoint
      {0x4665a9a6, 0x41198725},  // 0x1.cb534cp+13, 2^-52.7 from a midpoint
      {0x3bf86ef0, 0xc09c399e},  // 0x1.f0ddep-8, 2^-52.6 from a midpoint
  };
  for (const Golden& golden : kGolden)
    EXPECT_EQ(Bits(Log(FromBits(golden.input))), golden.output) << std::hexfloat << FromBits(golden.input);
}

// A 10-class row whose sum of exponentials rounds differently in class order, in
// reverse order and pairwise, and a coefficient that is not a power of 2, so its
// bits pin the row's own float operation order.
TEST(PortableMath, SoftmaxCrossEntropyRowGoldenBits) {
  const float logits[10] = {-0.62f, -1.00f, -3.04f, 0.15f, -0.87f, 1.19f, -1.95f, 1.48f, -1.89f, -0.57f};
  float loss = 0;
  float dlogits[10];
  SoftmaxCrossEntropyRow(logits, 10, 3, 1.0f / 100, &loss, dlogits);
  EXPECT_EQ(Bits(loss), 0x40104a65u);  // 0x1.2094cap+1
  constexpr std::uint32_t kGradient[10] = {0x39feb327u, 0x39ae2deau, 0x38352fc1u, 0xbc12a64eu, 0x39c65c45u,
                                           0x3b428a8eu, 0x3906b980u, 0x3b81fec0u, 0x390f0e37u, 0x3a05e119u};
  for (int c = 0; c < 10; ++c) EXPECT_EQ(Bits(dlogits[c]), kGradient[c]) << "class " << c;
}

}  // namespace
}  // namespace dtlab::portable
