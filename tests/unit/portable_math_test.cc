// Tests of core/portable_math.h: Exp and Log within 1 ulp of the exact value (against
// the C library in double precision) over a strided sample of all float bit
// patterns and dense windows where the edge cases live, their special values,
// SoftmaxCrossEntropyRow against a double-precision reference, and golden bits
// that the CUDA replay must reproduce.
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

// Checks `function` against `reference` at x; tracks the worst error and how many
// results differ from the reference rounded to float (not correctly rounded, up to
// the reference's own tiny error).
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
    if (Bits(got) != Bits(static_cast<float>(exact))) ++not_correctly_rounded;
    const double error = UlpError(got, exact);
    if (!(error <= max_ulp)) {
      max_ulp = error;
      worst_input = x;
    }
  }
};

void ExpectAccurate(const AccuracyTally& tally, const char* name) {
  EXPECT_LT(tally.max_ulp, 1.0) << name << " worst at " << std::hexfloat << tally.worst_input;
  // Results are correctly rounded except where the exact value lies within ~2^-52
  // relative of a midpoint between floats: a handful of the 2^32 inputs.
  EXPECT_LE(tally.not_correctly_rounded, 2) << name << " of " << tally.checked;
  ::testing::Test::RecordProperty(std::string(name) + "_max_ulp", std::to_string(tally.max_ulp));
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
TEST(PortableExp, WithinOneUlpOnStridedBitPatterns) {
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
TEST(PortableExp, WithinOneUlpOnItsNontrivialRange) {
  AccuracyTally tally;
  ForEachBitPattern(Bits(0x1p-26f), Bits(89.0f), 101, [&](float x) { tally.Check(x, Exp, ReferenceExp); });
  ForEachBitPattern(Bits(-0x1p-26f), Bits(-104.0f), 101, [&](float x) { tally.Check(x, Exp, ReferenceExp); });
  ExpectAccurate(tally, "Exp");
}

// Every float near overflow and near underflow (subnormal results and the last
// nonzero one).
TEST(PortableExp, WithinOneUlpAtEveryInputNearOverflowAndUnderflow) {
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

TEST(PortableLog, WithinOneUlpOnStridedBitPatterns) {
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
TEST(PortableLog, WithinOneUlpOnPositiveFloats) {
  AccuracyTally tally;
  ForEachBitPattern(1, Bits(std::numeric_limits<float>::max()), 199,
                    [&](float x) { tally.Check(x, Log, ReferenceLog); });
  ExpectAccurate(tally, "Log");
}

// Every float near 1, where the result is small and relative accuracy is hardest,
// every float in [1.4, 1.42] around the sqrt(2) switch of the reduction, and the
// smallest subnormals.
TEST(PortableLog, WithinOneUlpAtEveryInputNearOneAndTheRangeSwitch) {
  AccuracyTally tally;
  ForEachBitPattern(Bits(1.0f - 0x1p-10f), Bits(1.0f + 0x1p-10f), 1, [&](float x) { tally.Check(x, Log, ReferenceLog); });
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
    const double bound = 2 * std::fabs(coefficient) * kFloatEpsilon *
                             (probability * (2 * classes + 2 + std::fabs(shifted)) +
                              std::fabs(probability - (c == label))) +
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
  const auto ticks = *rc::gen::container<std::vector<int>>(static_cast<std::size_t>(classes),
                                                           rc::gen::inRange(-10000, 10001));
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
    if (c != label) RC_ASSERT(g * coefficient >= 0.0f);
    else RC_ASSERT(g * coefficient <= 0.0f);
  }
  RC_ASSERT(std::fabs(gradient_sum) <= std::fabs(coefficient) * 4 * (classes + 1) * kFloatEpsilon);

  const int other = *rc::gen::inRange(0, classes);
  float other_loss = 0;
  SoftmaxCrossEntropyRow(logits.data(), classes, other, coefficient, &other_loss, nullptr);
  const double expected_difference = static_cast<double>(logits[static_cast<std::size_t>(label)]) -
                                     logits[static_cast<std::size_t>(other)];
  RC_ASSERT(std::fabs((other_loss - loss) - expected_difference) <=
            4 * kFloatEpsilon * (std::fabs(loss) + std::fabs(other_loss) + 2 * classes));
}

// Golden bits. Exact mode and the CUDA replay must reproduce these; a change to any
// constant or to the order of operations must show here. Results at ordinary
// inputs are correctly rounded, and would stay so under most such changes, so the
// list also holds the inputs an exhaustive search found whose exact value lies
// closest to a midpoint between two floats: there the bits depend on the last
// rounding errors of the double computation.
TEST(PortableMath, GoldenBits) {
  struct Golden {
    float input;
    std::uint32_t bits;
  };
  // GOLDEN_EXP
  // GOLDEN_LOG
  // GOLDEN_ROW
}

}  // namespace
}  // namespace dtlab::portable
