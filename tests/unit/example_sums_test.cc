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

RC_GTEST_PROP(SumOuterProducts, GivesThePlainExactSums, ()) {
  const auto counts = *GenCounts();
  const std::int64_t I = *rc::gen::inRange<std::int64_t>(1, 4), J = *rc::gen::inRange<std::int64_t>(1, 37);
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
  std::vector<std::int64_t> out(static_cast<std::size_t>(I * J * kExactWords), 77);
  OuterProductScratch scratch;
  SumOuterProducts(terms, counts, begin, end, out.data(), scratch);
  for (std::int64_t i = 0; i < I; ++i)
    for (std::int64_t j = 0; j < J; ++j) {
      std::vector<std::int64_t> expected(kExactWords, 77);
      if (i >= begin && i < end) {
        std::fill(expected.begin(), expected.end(), 0);
        for (std::size_t c = 0; c < counts.size(); ++c)
          for (std::int64_t e = 0; e < counts[c]; ++e)
            ExactAddProduct(expected.data(), chunks[c].a[e * I + i], chunks[c].b[e * J + j]);
        ExactNormalize(expected.data());
      }
      const auto* got = out.data() + (i * J + j) * kExactWords;
      RC_ASSERT(std::equal(expected.begin(), expected.end(), got));
    }
}

RC_GTEST_PROP(SumValues, GivesThePlainExactSums, ()) {
  const auto counts = *GenCounts();
  const std::int64_t size = *rc::gen::inRange<std::int64_t>(1, 20);
  const bool special = *rc::gen::weightedElement<bool>({{4, false}, {1, true}});
  std::vector<ExampleTerms> chunks(counts.size());
  std::vector<const ExampleTerms*> terms;
  for (std::size_t c = 0; c < counts.size(); ++c) {
    chunks[c].values = RandomTensor(counts[c], size, special);
    terms.push_back(&chunks[c]);
  }
  const std::int64_t begin = *rc::gen::inRange<std::int64_t>(0, size);
  const std::int64_t end = *rc::gen::inRange<std::int64_t>(begin + 1, size + 1);
  std::vector<std::int64_t> out(static_cast<std::size_t>(size * kExactWords), 77);
  SumValues(terms, counts, begin, end, out.data());
  for (std::int64_t k = 0; k < size; ++k) {
    std::vector<std::int64_t> expected(kExactWords, 77);
    if (k >= begin && k < end) {
      std::fill(expected.begin(), expected.end(), 0);
      for (std::size_t c = 0; c < counts.size(); ++c)
        for (std::int64_t e = 0; e < counts[c]; ++e) ExactAddFloat(expected.data(), chunks[c].values[e * size + k]);
      ExactNormalize(expected.data());
    }
    RC_ASSERT(std::equal(expected.begin(), expected.end(), out.data() + k * kExactWords));
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
      SumOuterProducts(terms, counts, 0, 1, out.data(), scratch);
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
      SumValues(terms, counts, 0, 2, out.data());
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
      SumOuterProducts(terms, counts, 0, 1, out.data(), scratch);
      for (std::int64_t e = 0; e < kRows; ++e) ExactAddProduct(expected.data(), t.a[e], t.b[e]);
      ExactNormalize(expected.data());
      EXPECT_EQ(out, expected) << below << " binades below, significand " << significand;
    }
}

}  // namespace
}  // namespace dtlab
