// Exact mode's sums over examples (sim/compute/example_sums.h) against the plain
// definition: each element's terms added one by one with ExactAddProduct or
// ExactAddFloat (checked against a big-integer reference in exact_sum_test.cc), then
// normalized. The generators mix the exponents that take each of the kernels' paths:
// products near their element's largest (the double bins), products far below it
// (masked out of the bins), tiny factors in a whole row, subnormals, zeros beside
// infinities and NaN, and row counts from 1 to 300 (the bins' width depends on it).
#include "sim/compute/example_sums.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "core/exact_sum.h"

namespace dtlab {
namespace {

// A float of one of several kinds: mostly values within a few binades of 1 (as
// activations and deltas are), some zeros, some anywhere in float's range (from
// subnormals to near FLT_MAX), and when `special`, infinities and NaN.
rc::Gen<float> GenFactor(bool special) {
  return rc::gen::exec([special] {
    const int kind = *rc::gen::inRange(0, 100);
    const bool negative = *rc::gen::arbitrary<bool>();
    float x;
    if (kind < 25) {
      x = 0.0f;
    } else if (kind < 75) {
      x = std::ldexp(static_cast<float>(*rc::gen::inRange(1, 1 << 24)), *rc::gen::inRange(-30, 2) - 24);
    } else if (kind < 97 || !special) {
      x = std::bit_cast<float>(*rc::gen::inRange<std::uint32_t>(1, 0x7f800000u));
    } else if (kind < 99) {
      x = std::numeric_limits<float>::infinity();
    } else {
      x = std::numeric_limits<float>::quiet_NaN();
    }
    return negative ? -x : x;
  });
}

// Chunks of examples: each chunk's count, 1 to 300 rows in all.
rc::Gen<std::vector<std::int64_t>> GenCounts() {
  return rc::gen::exec([] {
    const std::int64_t rows = *rc::gen::element<std::int64_t>(1, 2, 3, 7, 16, 64, 65, 300);
    std::vector<std::int64_t> counts;
    for (std::int64_t left = rows; left > 0;) {
      const std::int64_t c = std::min(left, *rc::gen::inRange<std::int64_t>(1, 70));
      counts.push_back(c);
      left -= c;
    }
    return counts;
  });
}

Tensor<float> RandomTensor(std::int64_t rows, std::int64_t cols, bool special) {
  Tensor<float> t({rows, cols});
  for (std::int64_t k = 0; k < rows * cols; ++k) t[k] = *GenFactor(special);
  return t;
}

// What a property run asks the kernel for: the words alone or the rounded sums too,
// with or without regularization terms (random weights, a coefficient near the usual
// l2 * scale or anywhere in float's range, so that a term lands beside, far above
// or far below the sums' bins).
struct Request {
  std::vector<float> weights;
  float coefficient = 0.0f;
  bool rounded = false;
  std::vector<std::int64_t> words;
  std::vector<float> sums;

  Request(std::int64_t elements, bool special) : words(static_cast<std::size_t>(elements * kExactWords), 77) {
    rounded = *rc::gen::arbitrary<bool>();
    const int kind = *rc::gen::inRange(0, 4);
    if (kind > 0) {
      coefficient = kind == 1 ? 1e-4f : kind == 2 ? 0x1p-40f : *GenFactor(false);
      for (std::int64_t k = 0; k < elements; ++k) weights.push_back(*GenFactor(special));
    }
    sums.assign(static_cast<std::size_t>(elements), -77.0f);
  }
  SumOutput Output() { return {words.data(), coefficient, weights.data(), rounded ? sums.data() : nullptr}; }
  // Checks element k against the plain sum of its terms (`expected`, normalized
  // words), or against the sentinels when the kernel was not to touch it.
  void Check(std::int64_t k, std::vector<std::int64_t> expected, bool touched) const {
    const std::int64_t* got = words.data() + k * kExactWords;
    const float sum = sums[static_cast<std::size_t>(k)];
    if (!touched) {
      RC_ASSERT(std::all_of(got, got + kExactWords, [](std::int64_t w) { return w == 77; }));
      RC_ASSERT(sum == -77.0f);
      return;
    }
    if (coefficient != 0.0f) {
      const float t = RegularizationTerm(coefficient, weights[static_cast<std::size_t>(k)]);
      ExactAddFloat(expected.data(), t);
      ExactNormalize(expected.data());
    }
    if (rounded) {
      RC_ASSERT(std::bit_cast<std::uint32_t>(sum) == std::bit_cast<std::uint32_t>(ExactToFloat(expected.data())));
      if (std::isfinite(sum)) return;  // the words are needed only where it is not finite
    } else {
      RC_ASSERT(sum == -77.0f);
    }
    RC_ASSERT(std::equal(expected.begin(), expected.end(), got));
  }
};

RC_GTEST_PROP(SumOuterProducts, GivesThePlainExactSums, ()) {
  const auto counts = *GenCounts();
  // I up to 20: the inputs are gathered in 8 x 8 blocks (core/transpose.h) and edges.
  const std::int64_t I = *rc::gen::inRange<std::int64_t>(1, 21), J = *rc::gen::inRange<std::int64_t>(1, 37);
  const bool special = *rc::gen::weightedElement<bool>({{4, false}, {1, true}});
  std::vector<ExampleTerms> chunks(counts.size());
  std::vector<const ExampleTerms*> terms;
  for (std::size_t c = 0; c < counts.size(); ++c) {
    chunks[c].kind = ExampleTerms::Kind::kOuterProducts;
    chunks[c].a = RandomTensor(counts[c], I, special);
    chunks[c].b = RandomTensor(counts[c], J, special);
    // Now and then a column of b (or of a) far below the others, or one value far
    // below its column: the masked lanes and the rows that skip the bins.
    if (*rc::gen::inRange(0, 4) == 0) chunks[c].b[*rc::gen::inRange<std::int64_t>(0, counts[c] * J)] = 3e-41f;
    if (*rc::gen::inRange(0, 4) == 0) chunks[c].a[*rc::gen::inRange<std::int64_t>(0, counts[c] * I)] = -2e-30f;
    terms.push_back(&chunks[c]);
  }
  const std::int64_t begin = *rc::gen::inRange<std::int64_t>(0, I);
  const std::int64_t end = *rc::gen::inRange<std::int64_t>(begin + 1, I + 1);
  Request request(I * J, special);
  OuterProductScratch scratch;
  SumOuterProducts(terms, counts, begin, end, request.Output(), scratch);
  for (std::int64_t i = 0; i < I; ++i)
    for (std::int64_t j = 0; j < J; ++j) {
      std::vector<std::int64_t> expected(kExactWords, 0);
      for (std::size_t c = 0; c < counts.size(); ++c)
        for (std::int64_t e = 0; e < counts[c]; ++e)
          ExactAddProduct(expected.data(), chunks[c].a[e * I + i], chunks[c].b[e * J + j]);
      ExactNormalize(expected.data());
      request.Check(i * J + j, expected, i >= begin && i < end);
    }
}

RC_GTEST_PROP(SumValues, GivesThePlainExactSums, ()) {
  const auto counts = *GenCounts();
  // Small, or over 256 (more than one block of elements; groups of 16 and a tail).
  const std::int64_t size =
      *rc::gen::oneOf(rc::gen::inRange<std::int64_t>(1, 20), rc::gen::inRange<std::int64_t>(16, 600));
  const bool special = *rc::gen::weightedElement<bool>({{4, false}, {1, true}});
  std::vector<ExampleTerms> chunks(counts.size());
  std::vector<const ExampleTerms*> terms;
  for (std::size_t c = 0; c < counts.size(); ++c) {
    chunks[c].values = RandomTensor(counts[c], size, special);
    terms.push_back(&chunks[c]);
  }
  const std::int64_t begin = *rc::gen::inRange<std::int64_t>(0, size);
  const std::int64_t end = *rc::gen::inRange<std::int64_t>(begin + 1, size + 1);
  Request request(size, special);
  SumValues(terms, counts, begin, end, request.Output());
  for (std::int64_t k = 0; k < size; ++k) {
    std::vector<std::int64_t> expected(kExactWords, 0);
    for (std::size_t c = 0; c < counts.size(); ++c)
      for (std::int64_t e = 0; e < counts[c]; ++e) ExactAddFloat(expected.data(), chunks[c].values[e * size + k]);
    ExactNormalize(expected.data());
    request.Check(k, expected, k >= begin && k < end);
  }
}

// The bins' edges: every product at its element's largest (2^T, the carries into
// bin 0's top), a product exactly `reach` binades below (the last one the bins take)
// and one binade further (the first one they leave to the words), for each row count
// that changes the bins' width.
TEST(SumOuterProducts, TheBinsEdges) {
  for (const std::int64_t rows : {1, 2, 3, 4, 7, 8, 63, 64, 65, 127, 128, 1000}) {
    for (int below = 30; below <= 60; ++below) {
      ExampleTerms t;
      t.kind = ExampleTerms::Kind::kOuterProducts;
      t.a = Tensor<float>({rows, 1});
      t.b = Tensor<float>({rows, 2});
      for (std::int64_t e = 0; e < rows; ++e) {
        const float top = std::nextafter(2.0f, 0.0f);  // 24 one bits
        t.a[e] = e % 3 == 2 ? -top : top;
        t.b[e * 2] = top;
        t.b[e * 2 + 1] = e == rows - 1 ? std::ldexp(top, -below) : top;
      }
      const std::vector<std::int64_t> counts = {rows};
      const ExampleTerms* terms[] = {&t};
      std::vector<std::int64_t> out(2 * kExactWords);
      OuterProductScratch scratch;
      SumOuterProducts(terms, counts, 0, 1, SumOutput{out.data()}, scratch);
      for (std::int64_t j = 0; j < 2; ++j) {
        std::vector<std::int64_t> expected(kExactWords, 0);
        for (std::int64_t e = 0; e < rows; ++e) ExactAddProduct(expected.data(), t.a[e], t.b[e * 2 + j]);
        ExactNormalize(expected.data());
        EXPECT_TRUE(std::equal(expected.begin(), expected.end(), out.data() + j * kExactWords))
            << rows << " rows, " << below << " binades below, column " << j;
      }
    }
  }
}

// SumValues' edges: the largest values (2 - 2^-23, 24 one bits) in every row, and
// in the last row of the second element one value `below` binades lower, around the
// bins' reach (75 binades for 64 rows), for each row count that changes the bins.
TEST(SumValues, TheBinsEdges) {
  for (const std::int64_t rows : {1, 2, 3, 4, 7, 8, 63, 64, 65, 127, 128, 1000}) {
    for (int below = 60; below <= 90; ++below) {
      ExampleTerms t;
      t.values = Tensor<float>({rows, 2});
      for (std::int64_t e = 0; e < rows; ++e) {
        const float top = e % 3 == 2 ? -(2.0f - 0x1p-23f) : 2.0f - 0x1p-23f;
        t.values[e * 2] = top;
        t.values[e * 2 + 1] = e == rows - 1 ? std::ldexp(top, -below) : top;
      }
      const std::vector<std::int64_t> counts = {rows};
      const ExampleTerms* terms[] = {&t};
      std::vector<std::int64_t> out(2 * kExactWords);
      SumValues(terms, counts, 0, 2, SumOutput{out.data()});
      for (std::int64_t k = 0; k < 2; ++k) {
        std::vector<std::int64_t> expected(kExactWords, 0);
        for (std::int64_t e = 0; e < rows; ++e) ExactAddFloat(expected.data(), t.values[e * 2 + k]);
        ExactNormalize(expected.data());
        EXPECT_TRUE(std::equal(expected.begin(), expected.end(), out.data() + k * kExactWords))
            << rows << " rows, " << below << " binades below, element " << k;
      }
    }
  }
}

// Bin 1 filled to its capacity: 127 rows (the most with the bins of 64 rows), the
// largest product (2 - 2^-23)^2 in the first, and in the 126 others a product
// `below` binades lower whose last bit is bin 1's unit when `below` is the bins'
// reach (44), with a significand that leaves bin 1 a remainder of almost minus half
// of bin 0's unit: (2^24 - 1)(3 2^22 + 1) near 1.5 units and (2^24 - 1)(2^23 + 1)
// near 0.5. Their sum then needs all 53 bits of bin 1's double: bins one bit
// narrower or wider (the other `below`) would round it.
TEST(SumOuterProducts, TheSecondBinsCapacity) {
  constexpr std::int64_t kRows = 127;
  for (const float significand : {3 * 0x1p22f + 1, 0x1p23f + 1})
    for (int below = 42; below <= 46; ++below) {
      ExampleTerms t;
      t.kind = ExampleTerms::Kind::kOuterProducts;
      t.a = Tensor<float>({kRows, 1});
      t.b = Tensor<float>({kRows, 1});
      const float top = 2.0f - 0x1p-23f;
      for (std::int64_t e = 0; e < kRows; ++e) {
        t.a[e] = top;
        t.b[e] = e == 0 ? top : std::ldexp(significand, -23 - below);
      }
      const std::vector<std::int64_t> counts = {kRows};
      const ExampleTerms* terms[] = {&t};
      std::vector<std::int64_t> out(kExactWords), expected(kExactWords, 0);
      OuterProductScratch scratch;
      SumOuterProducts(terms, counts, 0, 1, SumOutput{out.data()}, scratch);
      for (std::int64_t e = 0; e < kRows; ++e) ExactAddProduct(expected.data(), t.a[e], t.b[e]);
      ExactNormalize(expected.data());
      EXPECT_EQ(out, expected) << below << " binades below, significand " << significand;
    }
}

// Sums rounded from the bins (SumOutput::rounded) at rounding's edges, each against
// the plain words rounded by ExactToFloat: ties to even, a tie broken by a far bit,
// overflow to infinity (whose words must be written), subnormal and cancelled sums,
// and regularization terms far above, far below and cancelling the bins.
TEST(SumValues, RoundsFromTheBinsAsTheWordsRound) {
  struct Case {
    std::vector<float> values;
    float t;  // the regularization term: coefficient 0.5, weight t
  };
  const Case cases[] = {
      {{1.0f, 0x1p-24f}, 0.0f},                                // a tie: to even, down
      {{1.0f + 0x1p-23f, 0x1p-24f}, 0.0f},                     // a tie: to even, up
      {{1.0f, 0x1p-24f, 0x1p-70f}, 0.0f},                      // just above a tie
      {{1.0f, 0x1p-24f, -0x1p-70f}, 0.0f},                     // just below a tie
      {{3e38f, 3e38f}, 0.0f},                                  // overflows: infinity, from the words
      {{-3e38f, -3e38f, 1.0f}, 0.0f},                          // to minus infinity
      {{1e-40f, 1e-40f}, 0.0f},                                // a subnormal sum
      {{0x1p-126f, -0x1p-127f}, 0.0f},                         // a subnormal by cancellation
      {{1.0f}, -1.0f},                                         // cancelled by the term: +0
      {{1e-30f, 3e-31f}, 1e30f},                               // a term far above the bins
      {{1e30f, 3e29f}, 1e-30f},                                // a term far below them
      {{1.5f, -0.25f}, 0x1p-30f},                              // a term within them
      {{0x1p-24f, 0x1p-60f}, 1.0f},                            // above the bins' bound, the sum just above a tie: up
      {{-1.0f, 0x1p-24f}, 0x1p-25f},                           // a term that makes a tie
      {{0.0f, 0.0f}, 0.0f},                                    // zero: +0
      {{0.0f, -0.0f}, 1e-6f},                                  // no terms (a dead unit): the term alone
      {{0.0f, -0.0f}, -0.0f},                                  // still +0, as the words give
      {{1.0f, std::numeric_limits<float>::infinity()}, 0.0f},  // a non-finite term: the words
  };
  // Each case in kCopies elements: in a whole vector of lanes, and beside padding
  // lanes.
  constexpr std::int64_t kCopies = 9;
  for (std::size_t n = 0; n < std::size(cases); ++n) {
    const Case& c = cases[n];
    const auto rows = static_cast<std::int64_t>(c.values.size());
    ExampleTerms terms;
    terms.values = Tensor<float>({rows, kCopies});
    for (std::int64_t e = 0; e < rows * kCopies; ++e) terms.values[e] = c.values[static_cast<std::size_t>(e / kCopies)];
    const std::vector<std::int64_t> counts = {rows};
    const ExampleTerms* chunk[] = {&terms};
    std::vector<std::int64_t> words(kCopies * kExactWords, 77), expected(kExactWords, 0);
    std::vector<float> rounded(kCopies, -77.0f), weights(kCopies, c.t);
    SumValues(chunk, counts, 0, kCopies, SumOutput{words.data(), 0.5f, weights.data(), rounded.data()});
    for (const float v : c.values) ExactAddFloat(expected.data(), v);
    ExactAddFloat(expected.data(), RegularizationTerm(0.5f, c.t));
    ExactNormalize(expected.data());
    const float want = ExactToFloat(expected.data());
    for (std::int64_t k = 0; k < kCopies; ++k) {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(rounded[static_cast<std::size_t>(k)]), std::bit_cast<std::uint32_t>(want))
          << "case " << n << ", element " << k;
      if (!std::isfinite(want)) {
        EXPECT_TRUE(std::equal(expected.begin(), expected.end(), words.begin() + k * kExactWords)) << "case " << n;
      }
    }
  }
}

// Rounding from the bins with the term anywhere: values and terms of one to three
// bits at exponents 23 to 26 binades apart (so that sums land on float ties, just
// above and just below them), the term far above, within or far below the values,
// or cancelling the largest; each sum against the plain words rounded by ExactToFloat.
RC_GTEST_PROP(SumValues, RoundsTiesWhereverTheTermLies, ()) {
  const std::int64_t rows = *rc::gen::element<std::int64_t>(1, 2, 3, 5, 64);
  const int top = *rc::gen::inRange(-140, 120);
  const auto few_bits = [](int exponent) {
    const float significand = static_cast<float>(*rc::gen::element(1, 3, 5, 7));
    const float x = std::ldexp(significand, std::max(exponent, -149));
    return *rc::gen::arbitrary<bool>() ? -x : x;
  };
  std::vector<float> values(static_cast<std::size_t>(rows));
  for (float& v : values) v = few_bits(top - *rc::gen::element(0, 0, 23, 24, 25, 26, 48, 49, 50, 90));
  float t = few_bits(top + *rc::gen::element(-120, -50, -26, -25, -24, -1, 0, 1, 24, 25, 26, 50, 100));
  if (*rc::gen::inRange(0, 5) == 0) t = -values[0];
  if (!std::isfinite(t)) t = 0.0f;
  constexpr std::int64_t kCopies = 9;  // a whole vector of lanes and one beside padding
  ExampleTerms terms;
  terms.values = Tensor<float>({rows, kCopies});
  for (std::int64_t e = 0; e < rows * kCopies; ++e) terms.values[e] = values[static_cast<std::size_t>(e / kCopies)];
  const std::vector<std::int64_t> counts = {rows};
  const ExampleTerms* chunk[] = {&terms};
  std::vector<std::int64_t> words(kCopies * kExactWords, 77), expected(kExactWords, 0);
  std::vector<float> rounded(kCopies, -77.0f), weights(kCopies, t);
  SumValues(chunk, counts, 0, kCopies, SumOutput{words.data(), 0.5f, weights.data(), rounded.data()});
  for (const float v : values) ExactAddFloat(expected.data(), v);
  ExactAddFloat(expected.data(), RegularizationTerm(0.5f, t));
  ExactNormalize(expected.data());
  const float want = ExactToFloat(expected.data());
  for (std::int64_t k = 0; k < kCopies; ++k)
    RC_ASSERT(std::bit_cast<std::uint32_t>(rounded[static_cast<std::size_t>(k)]) == std::bit_cast<std::uint32_t>(want));
}

// The same for a product: one that overflows float (its words written), one that
// is subnormal, and one that is exact.
TEST(SumOuterProducts, RoundsFromTheBinsAsTheWordsRound) {
  for (const auto& [a, b] : {std::pair(0x1p100f, 0x1p100f), std::pair(-0x1p100f, 0x1p30f),
                             std::pair(0x1p-100f, 0x1p-40f), std::pair(3.0f, -5.0f)}) {
    ExampleTerms t;
    t.kind = ExampleTerms::Kind::kOuterProducts;
    t.a = Tensor<float>({1, 1});
    t.b = Tensor<float>({1, 1});
    t.a[0] = a, t.b[0] = b;
    const std::vector<std::int64_t> counts = {1};
    const ExampleTerms* terms[] = {&t};
    std::vector<std::int64_t> words(kExactWords, 77), expected(kExactWords, 0);
    float rounded = -77.0f;
    OuterProductScratch scratch;
    SumOuterProducts(terms, counts, 0, 1, SumOutput{words.data(), 0.0f, nullptr, &rounded}, scratch);
    ExactAddProduct(expected.data(), a, b);
    ExactNormalize(expected.data());
    const float want = ExactToFloat(expected.data());
    EXPECT_EQ(std::bit_cast<std::uint32_t>(rounded), std::bit_cast<std::uint32_t>(want)) << a << " * " << b;
    if (!std::isfinite(want)) {
      EXPECT_EQ(words, expected) << a << " * " << b;
    }
  }
}

}  // namespace
}  // namespace dtlab
