// OrderedGemm (blocked, vectorized) against OrderedGemmReference (the scalar
// definition): bit for bit, for any sizes, strides and values. Build this file with
// -march=native (AVX-512), -march=x86-64-v3 (AVX2) and -march=x86-64 (portable,
// software fma) to check that every path is the same chain.
#include "core/ordered_gemm.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace dtlab {
namespace {

// Filled into C before a call: a C entry outside the m x n result must keep it.
constexpr float kSentinel = -12345.5f;

enum class Values {
  kUniform,         // [-1, 1)
  kMixedMagnitude,  // sign * 10^[-8, 8]: small terms vanish next to large ones, in an order-dependent way
  kCancelling,      // mixed magnitudes, integers and their negations: partial sums cancel
};

// One product C = A * B with A(i, k) at a[i * a_row_stride + k * a_col_stride].
struct Problem {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t a_row_stride = 0, a_col_stride = 0, ldb = 0, ldc = 0;
  std::vector<float> a, b;

  float& A(std::int64_t i, std::int64_t kk) {
    return a[static_cast<std::size_t>(i * a_row_stride + kk * a_col_stride)];
  }
  float& B(std::int64_t kk, std::int64_t j) { return b[static_cast<std::size_t>(kk * ldb + j)]; }

  using Gemm = void (*)(std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, std::int64_t,
                        const float*, std::int64_t, float*, std::int64_t);
  // The whole C buffer (ldc per row, padding included) after `gemm`.
  std::vector<float> Run(Gemm gemm) const {
    std::vector<float> c(static_cast<std::size_t>(std::max<std::int64_t>(m * ldc, 1)), kSentinel);
    gemm(m, n, k, a.data(), a_row_stride, a_col_stride, b.data(), ldb, c.data(), ldc);
    return c;
  }
};

enum class Layout { kRowMajor, kTransposed, kStrided };

// A problem whose A has `layout` (kStrided: neither stride 1), with `pad` unused
// floats after each row of A (or column, when transposed), B and C.
Problem MakeProblem(std::int64_t m, std::int64_t n, std::int64_t k, Layout layout, std::int64_t pad) {
  Problem p;
  p.m = m, p.n = n, p.k = k;
  switch (layout) {
    case Layout::kRowMajor:
      p.a_row_stride = k + pad, p.a_col_stride = 1;
      break;
    case Layout::kTransposed:
      p.a_row_stride = 1, p.a_col_stride = m + pad;
      break;
    case Layout::kStrided:
      p.a_row_stride = 2 * k + pad + 1, p.a_col_stride = 2;
      break;
  }
  p.ldb = n + pad;
  p.ldc = n + pad;
  const std::int64_t a_size = m > 0 && k > 0 ? (m - 1) * p.a_row_stride + (k - 1) * p.a_col_stride + 1 : 0;
  p.a.assign(static_cast<std::size_t>(std::max<std::int64_t>(a_size, 1)), 0.0f);
  p.b.assign(static_cast<std::size_t>(std::max<std::int64_t>(k * p.ldb, 1)), 0.0f);
  return p;
}

float Draw(std::mt19937_64& rng, Values values) {
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-8.0f, 8.0f);
  switch (values) {
    case Values::kUniform:
      return unit(rng);
    case Values::kMixedMagnitude:
      return unit(rng) * std::pow(10.0f, exponent(rng));
    case Values::kCancelling: {
      const auto pick = rng() % 4;
      if (pick == 0) return 0.0f;
      if (pick == 1) return static_cast<float>(static_cast<int>(rng() % 2001) - 1000);  // exact integers
      return unit(rng) * std::pow(10.0f, exponent(rng));
    }
  }
  return 0.0f;
}

// Fills A and B (padding included: it must not be read into C).
void Fill(Problem& p, Values values, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (float& x : p.a) x = Draw(rng, values);
  for (float& x : p.b) x = Draw(rng, values);
  if (values == Values::kCancelling) {
    // Rows of A that repeat an earlier row's value with the opposite sign a few
    // steps later, so that large partial sums cancel and the small terms added
    // before the cancellation decide the result.
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t kk = 3; kk < p.k; kk += 5) p.A(i, kk) = -p.A(i, kk - 3);
  }
}

bool SameBits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// The first differing element, for a readable failure.
std::string FirstDifference(const std::vector<float>& got, const std::vector<float>& want, std::int64_t ldc) {
  for (std::size_t e = 0; e < got.size() && e < want.size(); ++e)
    if (std::bit_cast<std::uint32_t>(got[e]) != std::bit_cast<std::uint32_t>(want[e]))
      return "C[" + std::to_string(static_cast<std::int64_t>(e) / ldc) + "][" +
             std::to_string(static_cast<std::int64_t>(e) % ldc) + "] = " + std::to_string(got[e]) + ", want " +
             std::to_string(want[e]);
  return got.size() == want.size() ? "none" : "sizes differ";
}

void ExpectSameAsReference(const Problem& p) {
  const std::vector<float> got = p.Run(&OrderedGemm), want = p.Run(&OrderedGemmReference);
  EXPECT_TRUE(SameBits(got, want)) << "m=" << p.m << " n=" << p.n << " k=" << p.k << " strides=" << p.a_row_stride
                                   << "," << p.a_col_stride << " ldb=" << p.ldb << ": "
                                   << FirstDifference(got, want, p.ldc);
}

RC_GTEST_PROP(OrderedGemmProperty, MatchesTheReferenceBitForBit, ()) {
  // Uniform over the whole range from the first case on (inRange alone starts small).
  const auto size = rc::gen::resize(100, rc::gen::inRange<std::int64_t>(0, 71));
  const auto m = *size, n = *size, k = *size;
  const auto layout = *rc::gen::element(Layout::kRowMajor, Layout::kTransposed, Layout::kStrided);
  const auto pad = *rc::gen::element<std::int64_t>(0, 0, 1, 3, 17);
  const auto values = *rc::gen::element(Values::kUniform, Values::kMixedMagnitude, Values::kCancelling);
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  Problem p = MakeProblem(m, n, k, layout, pad);
  Fill(p, values, seed);
  const std::vector<float> got = p.Run(&OrderedGemm), want = p.Run(&OrderedGemmReference);
  RC_ASSERT(SameBits(got, want));
}

// The products of one training step of the seed CNN (bench/ordered_gemm_bench.cc).
TEST(OrderedGemm, MatchesTheReferenceOnTheModelShapes) {
  struct Shape {
    std::int64_t m, n, k;
    Layout layout;
  };
  const Shape shapes[] = {
      {16 * 26 * 26, 32, 9, Layout::kRowMajor},    // conv2d forward
      {16 * 11 * 11, 64, 288, Layout::kRowMajor},  // conv2d_1 forward
      {16 * 11 * 11, 288, 64, Layout::kRowMajor},  // conv2d_1 input gradient
      {288, 64, 121, Layout::kTransposed},         // conv2d_1 weight gradient of one example
      {9, 32, 676, Layout::kTransposed},           // conv2d weight gradient of one example
      {16, 64, 1600, Layout::kRowMajor},           // dense forward
      {16, 10, 64, Layout::kRowMajor},             // dense_1 forward
      {16, 1600, 64, Layout::kRowMajor},           // dense input gradient
  };
  std::uint64_t seed = 1;
  for (const Shape& s : shapes) {
    Problem p = MakeProblem(s.m, s.n, s.k, s.layout, 0);
    Fill(p, Values::kMixedMagnitude, seed++);
    ExpectSameAsReference(p);
  }
}

// More steps than one k block holds (the chains continue from C) and row and
// column counts that leave edge tiles.
TEST(OrderedGemm, MatchesTheReferenceAcrossKBlocks) {
  std::uint64_t seed = 100;
  for (const std::int64_t k : {511, 512, 513, 1100, 2049})
    for (const Layout layout : {Layout::kRowMajor, Layout::kTransposed, Layout::kStrided}) {
      Problem p = MakeProblem(13, 37, k, layout, 2);
      Fill(p, Values::kCancelling, seed++);
      ExpectSameAsReference(p);
    }
}

TEST(OrderedGemm, EmptyProductsWriteZerosOrNothing) {
  Problem p = MakeProblem(3, 5, 0, Layout::kRowMajor, 2);
  const std::vector<float> c = p.Run(&OrderedGemm);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 7; ++j) {
      const float want = j < 5 ? 0.0f : kSentinel;
      EXPECT_EQ(std::bit_cast<std::uint32_t>(c[static_cast<std::size_t>(i * 7 + j)]),
                std::bit_cast<std::uint32_t>(want));
    }
  for (const auto& [m, n] : {std::pair<std::int64_t, std::int64_t>{0, 5}, {3, 0}}) {
    Problem q = MakeProblem(m, n, 4, Layout::kRowMajor, 2);
    for (const float x : q.Run(&OrderedGemm)) EXPECT_EQ(x, kSentinel);
  }
}

// Each step is fused: a*b+c rounded once. Here fma(x, x, -(1 + 2^-11)) = 2^-24 with
// x = 1 + 2^-12, while the product rounded first (to 1 + 2^-11, a tie to even)
// would give exactly 0.
TEST(OrderedGemm, EveryStepIsAFusedMultiplyAdd) {
  const float x = 1.0f + std::ldexp(1.0f, -12);
  const float minus_rounded_square = -(1.0f + std::ldexp(1.0f, -11));
  ASSERT_EQ(x * x + minus_rounded_square, 0.0f);  // -ffp-contract=off: two roundings
  ASSERT_EQ(std::fma(x, x, minus_rounded_square), std::ldexp(1.0f, -24));
  for (const Layout layout : {Layout::kRowMajor, Layout::kTransposed, Layout::kStrided}) {
    // Every C element is the chain fma(x, x, fma(1, -(1 + 2^-11), 0)), across
    // full and masked vectors and full and edge row tiles.
    Problem p = MakeProblem(29, 53, 2, layout, 1);
    for (std::int64_t i = 0; i < p.m; ++i) p.A(i, 0) = 1.0f, p.A(i, 1) = x;
    for (std::int64_t j = 0; j < p.n; ++j) p.B(0, j) = minus_rounded_square, p.B(1, j) = x;
    const std::vector<float> c = p.Run(&OrderedGemm);
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j)
        ASSERT_EQ(c[static_cast<std::size_t>(i * p.ldc + j)], std::ldexp(1.0f, -24));
    EXPECT_TRUE(SameBits(c, p.Run(&OrderedGemmReference)));
  }
}

// The first step is fma(A(i,0), B[0][j], +0): a product of -0 gives +0, not -0.
TEST(OrderedGemm, ChainsStartFromPositiveZero) {
  Problem p = MakeProblem(7, 19, 1, Layout::kRowMajor, 0);
  for (std::int64_t i = 0; i < p.m; ++i) p.A(i, 0) = -0.0f;
  for (std::int64_t j = 0; j < p.n; ++j) p.B(0, j) = 1.0f;
  for (const float v : p.Run(&OrderedGemm)) EXPECT_EQ(std::bit_cast<std::uint32_t>(v), 0u);
}

// The chain runs in ascending k: with these values, descending k or two halves
// added at the end (what a split over k without carrying the partial sum would
// do) give other bits, and OrderedGemm still gives the ascending chain's.
TEST(OrderedGemm, StepsRunInAscendingK) {
  // One row by hand: 1e8, -1e8, 1 ascending is 1; descending, 1 - 1e8 rounds to
  // -1e8 and the result is 0.
  {
    Problem p = MakeProblem(1, 1, 3, Layout::kRowMajor, 0);
    p.A(0, 0) = 1e8f, p.A(0, 1) = -1e8f, p.A(0, 2) = 1.0f;
    for (std::int64_t kk = 0; kk < 3; ++kk) p.B(kk, 0) = 1.0f;
    EXPECT_EQ(p.Run(&OrderedGemm)[0], 1.0f);
  }
  // Many rows and columns across k blocks.
  Problem p = MakeProblem(21, 45, 1100, Layout::kTransposed, 0);
  Fill(p, Values::kCancelling, 7);
  const std::vector<float> got = p.Run(&OrderedGemm);
  std::int64_t differs_descending = 0, differs_split = 0;
  for (std::int64_t i = 0; i < p.m; ++i)
    for (std::int64_t j = 0; j < p.n; ++j) {
      float ascending = 0.0f, descending = 0.0f, first_half = 0.0f, second_half = 0.0f;
      for (std::int64_t kk = 0; kk < p.k; ++kk) {
        ascending = std::fma(p.A(i, kk), p.B(kk, j), ascending);
        descending = std::fma(p.A(i, p.k - 1 - kk), p.B(p.k - 1 - kk, j), descending);
        float& half = kk < p.k / 2 ? first_half : second_half;
        half = std::fma(p.A(i, kk), p.B(kk, j), half);
      }
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got[static_cast<std::size_t>(i * p.ldc + j)]),
                std::bit_cast<std::uint32_t>(ascending))
          << i << "," << j;
      differs_descending += ascending != descending;
      differs_split += ascending != first_half + second_half;
    }
  // Else this input could not tell the orders apart.
  EXPECT_GT(differs_descending, p.m * p.n / 2);
  EXPECT_GT(differs_split, p.m * p.n / 2);
}

// Row i of C does not depend on the other rows computed with it (which tile, edge
// or full, it fell in), nor column j on the other columns (which lane or mask).
TEST(OrderedGemm, RowsAndColumnsAreBatchInvariant) {
  for (const Layout layout : {Layout::kRowMajor, Layout::kTransposed}) {
    Problem p = MakeProblem(43, 70, 300, layout, 0);
    Fill(p, Values::kMixedMagnitude, 11);
    const std::vector<float> whole = p.Run(&OrderedGemm);
    for (std::int64_t i = 0; i < p.m; ++i) {
      std::vector<float> row(static_cast<std::size_t>(p.n));
      OrderedGemm(1, p.n, p.k, &p.A(i, 0), p.a_row_stride, p.a_col_stride, p.b.data(), p.ldb, row.data(), p.n);
      ASSERT_EQ(std::memcmp(row.data(), whole.data() + i * p.ldc, row.size() * sizeof(float)), 0) << "row " << i;
    }
    for (std::int64_t j = 0; j < p.n; ++j) {
      std::vector<float> column(static_cast<std::size_t>(p.m));
      OrderedGemm(p.m, 1, p.k, p.a.data(), p.a_row_stride, p.a_col_stride, &p.B(0, j), p.ldb, column.data(), 1);
      for (std::int64_t i = 0; i < p.m; ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(column[static_cast<std::size_t>(i)]),
                  std::bit_cast<std::uint32_t>(whole[static_cast<std::size_t>(i * p.ldc + j)]))
            << i << "," << j;
    }
  }
}

// Infinities and NaNs go through the chain as through std::fma: inf * 0 and
// inf - inf are NaN, a NaN stays NaN, an inf alone stays inf. NaN payloads are not
// compared: which NaN operand x86 returns depends on the instruction's operand
// order, which the compiler chooses (and CUDA returns one canonical NaN anyway).
TEST(OrderedGemm, PropagatesInfinitiesAndNaNs) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Problem p = MakeProblem(17, 35, 6, Layout::kRowMajor, 1);
  Fill(p, Values::kUniform, 3);
  p.A(0, 2) = inf;  // row 0: inf * B[2][j] (+-inf) plus finite terms
  p.A(1, 0) = nan;  // row 1: NaN from the first step on
  p.A(2, 1) = inf;  // row 2: inf at step 1 and -inf at step 4 (B is 1 there): inf - inf
  p.A(2, 4) = -inf;
  p.B(3, 0) = inf;   // column 0: inf at step 3 in every row
  p.B(5, 1) = nan;   // column 1: NaN at the last step
  p.A(3, 3) = 0.0f;  // row 3, column 0: 0 * inf
  for (std::int64_t j = 0; j < p.n; ++j) {
    p.B(2, j) = j % 2 == 0 ? 0.5f : -0.5f;
    p.B(1, j) = p.B(4, j) = 1.0f;
  }
  const std::vector<float> got = p.Run(&OrderedGemm), want = p.Run(&OrderedGemmReference);
  for (std::size_t e = 0; e < got.size(); ++e) {
    if (std::isnan(want[e]))
      EXPECT_TRUE(std::isnan(got[e])) << e;
    else
      EXPECT_EQ(std::bit_cast<std::uint32_t>(got[e]), std::bit_cast<std::uint32_t>(want[e])) << e;
  }
  const auto at = [&](std::int64_t i, std::int64_t j) { return got[static_cast<std::size_t>(i * p.ldc + j)]; };
  EXPECT_EQ(at(0, 2), inf);
  EXPECT_EQ(at(0, 3), -inf);
  for (std::int64_t j = 0; j < p.n; ++j) EXPECT_TRUE(std::isnan(at(1, j))) << j;
  for (std::int64_t j = 0; j < p.n; ++j) EXPECT_TRUE(std::isnan(at(2, j))) << j;
  EXPECT_TRUE(std::isnan(at(3, 0)));
  for (std::int64_t i = 0; i < p.m; ++i) EXPECT_TRUE(std::isnan(at(i, 1))) << i;
}

// ---- The zero-skipping products (core/ordered_gemm_sparse.cc): OrderedGemm's bits. ----
// They take only products whose rows of C (A) or columns (B) span at least 64
// floats, so the tests' sizes are at least that.

// Sets a share `percent` of the entries of A (or of B) to zero, half of them -0, the
// way the gradient behind max pooling and ReLU is mostly zeros.
void Sparsify(Problem& p, bool in_a, int percent, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::int64_t rows = in_a ? p.m : p.k, columns = in_a ? p.k : p.n;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < columns; ++c) {
      float& x = in_a ? p.A(r, c) : p.B(r, c);
      if (static_cast<int>(rng() % 100) >= percent) x = rng() % 2 == 0 ? 0.0f : -0.0f;
    }
}

void ExpectSparseSameAsReference(const Problem& p, bool in_a) {
  const std::vector<float> got = p.Run(in_a ? &OrderedGemmSparseA : &OrderedGemmSparseB),
                           want = p.Run(&OrderedGemmReference);
  EXPECT_TRUE(SameBits(got, want)) << (in_a ? "A" : "B") << " m=" << p.m << " n=" << p.n << " k=" << p.k
                                   << " strides=" << p.a_row_stride << "," << p.a_col_stride << ": "
                                   << FirstDifference(got, want, p.ldc);
}

RC_GTEST_PROP(OrderedGemmProperty, SkippingZerosMatchesTheReferenceBitForBit, ()) {
  // Up to 150 rows and columns: the zero-skipping kernels take products whose rows
  // (A) or columns (B) span at least four vectors, and leave the rest to OrderedGemm.
  const auto size = rc::gen::resize(100, rc::gen::inRange<std::int64_t>(0, 150));
  const auto m = *size, n = *size, k = *rc::gen::resize(100, rc::gen::inRange<std::int64_t>(0, 90));
  const bool in_a = *rc::gen::arbitrary<bool>();
  // The kernel's own layout most of the time; any other falls back to OrderedGemm.
  const auto layout = *rc::gen::element(in_a ? Layout::kRowMajor : Layout::kTransposed,
                                        in_a ? Layout::kRowMajor : Layout::kTransposed, Layout::kStrided);
  const auto pad = *rc::gen::element<std::int64_t>(0, 0, 1, 3, 17);
  const auto values = *rc::gen::element(Values::kUniform, Values::kMixedMagnitude, Values::kCancelling);
  const int non_zero_percent = *rc::gen::element(0, 5, 20, 35, 60, 100);
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  Problem p = MakeProblem(m, n, k, layout, pad);
  Fill(p, values, seed);
  Sparsify(p, in_a, non_zero_percent, seed + 1);
  const std::vector<float> got = p.Run(in_a ? &OrderedGemmSparseA : &OrderedGemmSparseB),
                           want = p.Run(&OrderedGemmReference);
  RC_ASSERT(SameBits(got, want));
}

// The seed CNN's backward products, with the zeros max pooling leaves in the
// gradient (three positions in four) and more from ReLU.
TEST(OrderedGemmSparse, MatchesTheReferenceOnTheModelShapes) {
  std::uint64_t seed = 500;
  for (const int percent : {10, 20, 30}) {
    Problem weights = MakeProblem(288, 64, 16 * 121, Layout::kTransposed, 0);  // conv2d_1 weight gradient
    Fill(weights, Values::kMixedMagnitude, seed++);
    Sparsify(weights, false, percent, seed++);
    ExpectSparseSameAsReference(weights, false);
    Problem inputs = MakeProblem(16 * 121, 288, 64, Layout::kRowMajor, 0);  // conv2d_1 input gradient
    Fill(inputs, Values::kMixedMagnitude, seed++);
    Sparsify(inputs, true, percent, seed++);
    ExpectSparseSameAsReference(inputs, true);
  }
}

// A left-out step fma(x, +0, -0) would have turned -0 into +0. Here the chain's one
// non-zero step underflows to -0 (-2^-100 * 2^-60 is below half the smallest
// subnormal) and every later step adds +0: the full chain ends at +0, and so must
// the shortened one. A last non-zero step at -0 with nothing after it stays -0.
TEST(OrderedGemmSparse, AChainThatUnderflowsToNegativeZeroEndsAsTheFullChain) {
  const float small = -std::ldexp(1.0f, -100), smaller = std::ldexp(1.0f, -60);
  ASSERT_EQ(std::bit_cast<std::uint32_t>(std::fma(small, smaller, 0.0f)), 0x80000000u);
  for (const bool in_a : {true, false}) {
    Problem p = MakeProblem(70, 71, 12, in_a ? Layout::kRowMajor : Layout::kTransposed, 0);
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t kk = 0; kk < p.k; ++kk) p.A(i, kk) = in_a ? 0.0f : 1.0f;
    for (std::int64_t kk = 0; kk < p.k; ++kk)
      for (std::int64_t j = 0; j < p.n; ++j) p.B(kk, j) = in_a ? 1.0f : 0.0f;
    // Row (or column) 0 ends after its underflow; the others add +0 steps after it.
    for (std::int64_t r = 0; r < (in_a ? p.m : p.n); ++r) {
      const std::int64_t step = r == 0 ? p.k - 1 : 1;
      if (in_a) {
        p.A(r, step) = small;
        for (std::int64_t j = 0; j < p.n; ++j) p.B(step, j) = smaller;
      } else {
        p.B(step, r) = small;
        for (std::int64_t i = 0; i < p.m; ++i) p.A(i, step) = smaller;
      }
    }
    const std::vector<float> got = p.Run(in_a ? &OrderedGemmSparseA : &OrderedGemmSparseB);
    EXPECT_TRUE(SameBits(got, p.Run(&OrderedGemmReference))) << in_a;
    const auto at = [&](std::int64_t i, std::int64_t j) {
      return std::bit_cast<std::uint32_t>(got[static_cast<std::size_t>(i * p.ldc + j)]);
    };
    EXPECT_EQ(at(0, in_a ? 5 : 0), 0x80000000u) << in_a;  // ended at the underflow
    EXPECT_EQ(at(1, in_a ? 5 : 1), 0u) << in_a;           // +0 steps came after it
  }
}

// An infinity or a NaN facing a zero makes a NaN in the full chain: the shortened
// one must not lose it.
TEST(OrderedGemmSparse, AnInfinityFacingAZeroStillMakesANaN) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // For B: step 7 has non-zero entries in B (the infinity enters some shortened
  // chains) or none (it enters no shortened chain at all).
  for (const bool in_a : {true, false})
    for (const bool whole_row_zero : {false, true})
      for (const float bad : {inf, nan}) {
        Problem p = MakeProblem(70, 70, 50, in_a ? Layout::kRowMajor : Layout::kTransposed, 0);
        Fill(p, Values::kUniform, 9);
        Sparsify(p, in_a, 10, 10);
        if (in_a) {
          p.B(7, 3) = bad;
        } else {
          p.A(5, 7) = bad;
          for (std::int64_t j = 0; j < p.n; ++j)
            if (whole_row_zero || j % 3 == 0) p.B(7, j) = 0.0f;
        }
        const std::vector<float> got = p.Run(in_a ? &OrderedGemmSparseA : &OrderedGemmSparseB),
                                 want = p.Run(&OrderedGemmReference);
        std::int64_t nans = 0;
        for (std::size_t e = 0; e < got.size(); ++e) {
          ASSERT_EQ(std::isnan(got[e]), std::isnan(want[e])) << e;
          if (!std::isnan(want[e])) {
            ASSERT_EQ(std::bit_cast<std::uint32_t>(got[e]), std::bit_cast<std::uint32_t>(want[e])) << e;
          }
          nans += std::isnan(want[e]);
        }
        EXPECT_GT(nans, 0);  // else the case tests nothing
      }
}

// ---- Segmented rows (a convolution's patch matrix read in place) and the epilogue. ----

// A convolution's input [H, W, C] with its patch matrix built explicitly (im2col, a
// row per output pixel, (kh, kw, c) order) and as segmented rows over the input.
struct Patches {
  std::int64_t height, width, channels, kernel, out_h, out_w;
  std::vector<float> input, matrix;  // matrix: [out_h * out_w, kernel * kernel * channels]
  std::vector<const float*> rows;
  std::int64_t rows_count() const { return out_h * out_w; }
  std::int64_t patch() const { return kernel * kernel * channels; }
  SegmentedRows Segmented() const { return {rows.data(), kernel * channels, width * channels}; }
};

Patches MakePatches(std::int64_t height, std::int64_t width, std::int64_t channels, std::int64_t kernel,
                    std::uint64_t seed) {
  Patches p{height, width, channels, kernel, height - kernel + 1, width - kernel + 1, {}, {}, {}};
  std::mt19937_64 rng(seed);
  p.input.resize(static_cast<std::size_t>(height * width * channels));
  for (float& v : p.input) v = Draw(rng, Values::kMixedMagnitude);
  for (std::int64_t oh = 0; oh < p.out_h; ++oh)
    for (std::int64_t ow = 0; ow < p.out_w; ++ow) {
      p.rows.push_back(p.input.data() + (oh * width + ow) * channels);
      for (std::int64_t kh = 0; kh < kernel; ++kh)
        for (std::int64_t kw = 0; kw < kernel; ++kw)
          for (std::int64_t c = 0; c < channels; ++c)
            p.matrix.push_back(p.input[static_cast<std::size_t>(((oh + kh) * width + ow + kw) * channels + c)]);
    }
  return p;
}

TEST(OrderedGemmSegmented, ReadsThePatchMatrixInPlaceWithTheSameBits) {
  // Segments of 3 (a k block each), 96 (conv2d_1's) and 600 (longer than a k block).
  for (const auto& [channels, kernel] : std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 3}, {32, 3}, {200, 3}}) {
    const Patches p = MakePatches(9, 8, channels, kernel, 40 + static_cast<std::uint64_t>(channels));
    const std::int64_t m = p.rows_count(), k = p.patch();
    for (const std::int64_t n : {1, 17, 64}) {
      std::mt19937_64 rng(7);
      std::vector<float> b(static_cast<std::size_t>(k * n)), bias(static_cast<std::size_t>(n));
      for (float& v : b) v = Draw(rng, Values::kUniform);
      for (float& v : bias) v = Draw(rng, Values::kUniform);
      std::vector<float> want(static_cast<std::size_t>(m * n)), got(want.size(), kSentinel);
      OrderedGemmReference(m, n, k, p.matrix.data(), k, 1, b.data(), n, want.data(), n);
      OrderedGemmSegmentedA(m, n, k, p.Segmented(), b.data(), n, got.data(), n, {});
      EXPECT_TRUE(SameBits(got, want)) << channels << " " << n << ": " << FirstDifference(got, want, n);
      // With the epilogue: bias, then ReLU, as a second pass would.
      for (std::size_t e = 0; e < want.size(); ++e) {
        const float v = want[e] + bias[e % static_cast<std::size_t>(n)];
        want[e] = v > 0.0f ? v : 0.0f;
      }
      OrderedGemmSegmentedA(m, n, k, p.Segmented(), b.data(), n, got.data(), n, {bias.data(), true});
      EXPECT_TRUE(SameBits(got, want)) << channels << " " << n << ": " << FirstDifference(got, want, n);
    }
  }
}

TEST(OrderedGemmEpilogue, BiasThenReluAsASecondPass) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // Sums that come out NaN, -0, +0, negative, positive and infinite.
  for (const std::int64_t n : {5, 16, 40}) {
    Problem p = MakeProblem(6, n, 2, Layout::kRowMajor, 0);
    Fill(p, Values::kUniform, 3);
    p.A(0, 0) = nan;
    p.A(1, 0) = -0.0f, p.A(1, 1) = -0.0f;
    p.A(2, 0) = 0.0f, p.A(2, 1) = 0.0f;
    p.A(3, 0) = inf;
    std::vector<float> bias(static_cast<std::size_t>(n));
    for (std::size_t j = 0; j < bias.size(); ++j) bias[j] = j % 3 == 0 ? -0.0f : j % 3 == 1 ? 0.25f : -0.25f;
    for (const bool relu : {false, true})
      for (const bool with_bias : {false, true}) {
        std::vector<float> want = p.Run(&OrderedGemmReference);
        for (std::int64_t i = 0; i < p.m; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            float& v = want[static_cast<std::size_t>(i * p.ldc + j)];
            if (with_bias) v += bias[static_cast<std::size_t>(j)];
            if (relu) v = v > 0.0f ? v : 0.0f;
          }
        std::vector<float> got(want.size(), kSentinel);
        OrderedGemmWithEpilogue(p.m, n, p.k, p.a.data(), p.a_row_stride, p.a_col_stride, p.b.data(), p.ldb, got.data(),
                                p.ldc, {with_bias ? bias.data() : nullptr, relu});
        for (std::size_t e = 0; e < got.size(); ++e) {
          if (!(std::isnan(got[e]) && std::isnan(want[e]))) {
            ASSERT_EQ(std::bit_cast<std::uint32_t>(got[e]), std::bit_cast<std::uint32_t>(want[e]))
                << "n=" << n << " relu=" << relu << " bias=" << with_bias << " element " << e;
          }
        }
      }
  }
}

// The weight gradient of a convolution with the patches read in place: the
// zero-skipping kernel applies (whole-vector segments, sparse dz) and gives the
// reference chains' bits.
TEST(OrderedGemmSegmented, WeightGradientReadsPatchRowsInPlace) {
  for (const std::int64_t channels : {16, 32}) {
    const Patches p = MakePatches(13, 13, channels, 3, 60 + static_cast<std::uint64_t>(channels));
    const std::int64_t m = p.patch(), k = p.rows_count(), n = 64;
    Problem dz = MakeProblem(m, n, k, Layout::kTransposed, 0);  // only B (dz, k x n) is used
    Fill(dz, Values::kMixedMagnitude, 61);
    Sparsify(dz, false, 20, 62);
    std::vector<float> want(static_cast<std::size_t>(m * n)), got(want.size(), kSentinel);
    // A = patches^T: A(i, kk) = matrix[kk][i].
    OrderedGemmReference(m, n, k, p.matrix.data(), 1, m, dz.b.data(), n, want.data(), n);
    ASSERT_TRUE(OrderedGemmSparseBSegmentedColumns(m, n, k, p.Segmented(), dz.b.data(), n, got.data(), n));
    EXPECT_TRUE(SameBits(got, want)) << channels << ": " << FirstDifference(got, want, n);
    // A dense dz is left to the caller.
    Fill(dz, Values::kUniform, 63);
    EXPECT_FALSE(OrderedGemmSparseBSegmentedColumns(m, n, k, p.Segmented(), dz.b.data(), n, got.data(), n));
  }
}

// The input gradient added into the input's place in col2im's order: the bits of
// the reference product followed by col2im.
TEST(OrderedGemmSegmented, InputGradientAddsInCol2ImOrder) {
  for (const std::int64_t channels : {16, 32}) {
    Patches p = MakePatches(13, 12, channels, 3, 70 + static_cast<std::uint64_t>(channels));
    const std::int64_t m = p.rows_count(), n = p.patch(), k = 64;
    Problem dz = MakeProblem(m, n, k, Layout::kRowMajor, 0);  // A = dz (m x k), B = kernel^T (k x n)
    Fill(dz, Values::kMixedMagnitude, 71);
    Sparsify(dz, true, 20, 72);
    for (std::int64_t kk = 0; kk < k; ++kk) dz.B(kk, 0) = -0.0f;  // a column of C from -0 steps
    std::vector<float> patch_gradient(static_cast<std::size_t>(m * n));
    OrderedGemmReference(m, n, k, dz.a.data(), k, 1, dz.b.data(), n, patch_gradient.data(), n);
    std::vector<float> want(p.input.size(), 0.0f);
    for (std::int64_t oh = 0; oh < p.out_h; ++oh)
      for (std::int64_t ow = 0; ow < p.out_w; ++ow)
        for (std::int64_t e = 0; e < n; ++e) {
          const std::int64_t kh = e / (3 * channels), kw = e / channels % 3, c = e % channels;
          want[static_cast<std::size_t>(((oh + kh) * p.width + ow + kw) * channels + c)] +=
              patch_gradient[static_cast<std::size_t>((oh * p.out_w + ow) * n + e)];
        }
    std::vector<float> got(p.input.size(), 0.0f);
    std::vector<float*> out_rows;
    for (const float* row : p.rows) out_rows.push_back(got.data() + (row - p.input.data()));
    ASSERT_TRUE(OrderedGemmSparseAAddToSegmentedRows(m, n, k, dz.a.data(), k, dz.b.data(), n,
                                                     {out_rows.data(), 3 * channels, p.width * channels}));
    EXPECT_TRUE(SameBits(got, want)) << channels << ": " << FirstDifference(got, want, channels);
    // A non-finite kernel is left to the caller, with nothing written.
    dz.B(3, 5) = std::numeric_limits<float>::infinity();
    const std::vector<float> before = got;
    EXPECT_FALSE(OrderedGemmSparseAAddToSegmentedRows(m, n, k, dz.a.data(), k, dz.b.data(), n,
                                                      {out_rows.data(), 3 * channels, p.width * channels}));
    EXPECT_TRUE(SameBits(got, before));
  }
}

}  // namespace
}  // namespace dtlab
