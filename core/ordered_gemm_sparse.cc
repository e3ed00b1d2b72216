// OrderedGemm's chains with their zero steps left out (core/ordered_gemm.h), for
// products where one operand is mostly zeros: the gradient that reaches a layer
// through max pooling (one position in four) and ReLU.
//
// Why the bits are OrderedGemm's. Leaving out a step fma(x, ±0, acc) with x finite
// adds ±0 to acc: that is acc again, except that -0 + +0 gives +0. So the chain
// without its zero steps and the full chain carry equal floats at every step, or
// two zeros of possibly different signs; and a non-zero step gives the same float
// from either zero (x*y + 0 is x*y exactly, rounded once). Their results are then
// equal, except where the shortened chain ends at -0 (the full one may have turned
// it into +0): those elements, which need an underflow to exist at all, are
// computed again as full chains. A non-finite x would turn a left-out step into a
// NaN, so an operand with an infinity or a NaN takes the full chains
// (OrderedGemm) instead. tests/unit/ordered_gemm_test.cc checks all of this
// against OrderedGemmReference.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "core/ordered_gemm.h"
#include "core/ordered_simd.h"

namespace dtlab {
namespace {

using ordered_simd::kLanes;
using ordered_simd::Mask;
using ordered_simd::Simd;
using ordered_simd::Vec;

// The zero-skipping kernels pay for finding the non-zero entries and, for B, for
// keeping the chains in memory: above this share of non-zero entries the full
// chains are faster.
constexpr std::int64_t kMaxNonZeroPercent = 40;

// Each non-zero entry costs finding it and a broadcast: worth it only if it then
// feeds at least this many vectors of C (a row of C for A, a column for B).
constexpr std::int64_t kMinVectors = 4;

// Vectors of C one register panel holds: the accumulators, one broadcast and one
// loaded vector must fit in the registers.
constexpr int kMaxPanel = kLanes == 16 ? 24 : kLanes == 8 ? 12 : 8;

// Rows of B (A's columns) per block of the B kernel: the block's columns of A stay
// in the level-1 cache while every column of C walks over them.
constexpr std::int64_t kBlockSteps = 32;

// Non-zero bits of row[0 .. n) into words (bit b of words[w]: element 64 w + b; a
// NaN is not zero); returns how many.
std::int64_t NonZeroWords(const float* row, std::int64_t n, std::uint64_t* words) {
  const std::int64_t num_words = (n + 63) / 64;
  std::fill(words, words + num_words, std::uint64_t{0});
  for (std::int64_t j = 0; j < n; j += kLanes) {
    const int lanes = static_cast<int>(std::min<std::int64_t>(kLanes, n - j));
    const Vec v = lanes == kLanes ? Simd::Load(row + j) : Simd::LoadMasked(row + j, Simd::FirstLanes(lanes));
    words[j / 64] |= std::uint64_t{Simd::NonZeroBits(v)} << (j % 64);  // kLanes divides 64
  }
  std::int64_t count = 0;
  for (std::int64_t w = 0; w < num_words; ++w) count += std::popcount(words[w]);
  return count;
}

// x * 0 is a zero for a finite x and a NaN otherwise: chained with fma, one NaN
// stays (four chains, so that the check runs at the fma rate, not its latency).
bool AllFinite(const float* x, std::int64_t count, std::int64_t stride, std::int64_t rows) {
  Vec bad[4] = {Simd::Zero(), Simd::Zero(), Simd::Zero(), Simd::Zero()};
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * stride;
    std::int64_t j = 0;
    for (; j + 4 * kLanes <= count; j += 4 * kLanes)
      for (int u = 0; u < 4; ++u) bad[u] = Simd::Fma(Simd::Load(row + j + u * kLanes), Simd::Zero(), bad[u]);
    for (; j + kLanes <= count; j += kLanes) bad[0] = Simd::Fma(Simd::Load(row + j), Simd::Zero(), bad[0]);
    if (j < count)
      bad[1] =
          Simd::Fma(Simd::LoadMasked(row + j, Simd::FirstLanes(static_cast<int>(count - j))), Simd::Zero(), bad[1]);
  }
  return (Simd::NonZeroBits(bad[0]) | Simd::NonZeroBits(bad[1]) | Simd::NonZeroBits(bad[2]) |
          Simd::NonZeroBits(bad[3])) == 0;
}

// Elements of C that came out -0 are computed again as full chains (see the top).
void RedoNegativeZeros(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row_stride,
                       std::int64_t a_col_stride, const float* b, std::int64_t ldb, float* c, std::int64_t ldc) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      if (std::bit_cast<std::uint32_t>(c[i * ldc + j]) == 0x80000000u)
        OrderedGemmReference(1, 1, k, a + i * a_row_stride, a_row_stride, a_col_stride, b + j, ldb, c + i * ldc + j,
                             ldc);
}

struct PanelArgs {
  const std::uint64_t* words;  // the non-zero steps
  std::int64_t num_words;
  const float* a;  // A kernel: A(i, 0) of the row; B kernel: unused
  const float* b;  // A kernel: B[0][j0]; B kernel: A(i0, 0) (the columns of A play B's part)
  std::int64_t ldb;
  float* c;
  Mask last_mask;
};

// A kernel: one row of C, kVectors vectors from j0, in registers; each non-zero
// A(i, k) in ascending k broadcasts against kVectors vectors of row k of B.
template <int kVectors, bool kMasked>
bool RowPanel(const PanelArgs& t) {
  Vec acc[kVectors];
#pragma GCC unroll 24
  for (int v = 0; v < kVectors; ++v) acc[v] = Simd::Zero();
  for (std::int64_t w = 0; w < t.num_words; ++w)
    for (std::uint64_t bits = t.words[w]; bits != 0; bits &= bits - 1) {
      const std::int64_t kk = w * 64 + std::countr_zero(bits);
      const Vec av = Simd::Broadcast(t.a + kk);
      const float* row = t.b + kk * t.ldb;
#pragma GCC unroll 24
      for (int v = 0; v < kVectors; ++v) {
        const Vec bv = (kMasked && v == kVectors - 1) ? Simd::LoadMasked(row + v * kLanes, t.last_mask)
                                                      : Simd::Load(row + v * kLanes);
        acc[v] = Simd::Fma(av, bv, acc[v]);
      }
    }
  std::uint32_t negative_zeros = 0;  // lanes past a masked end hold +0
#pragma GCC unroll 24
  for (int v = 0; v < kVectors; ++v) {
    negative_zeros |= Simd::NegativeZeroBits(acc[v]);
    if (kMasked && v == kVectors - 1)
      Simd::StoreMasked(t.c + v * kLanes, acc[v], t.last_mask);
    else
      Simd::Store(t.c + v * kLanes, acc[v]);
  }
  return negative_zeros != 0;
}

// B kernel: one column j of C, kVectors vectors of rows from i0, continued from the
// chains in c (C transposed, so a column is contiguous); each listed step k (a
// non-zero B[k][j]) broadcasts B[k][j] against kVectors vectors of column k of A.
struct ColumnArgs {
  const std::int64_t* steps;  // ascending k
  const float* values;        // B[k][j] of each step
  std::int64_t count;
  const float* a;  // A(i0, 0)
  std::int64_t a_col_stride;
  float* c;  // C^T[j][i0]
  Mask last_mask;
};

template <int kVectors, bool kMasked>
void ColumnPanel(const ColumnArgs& t) {
  Vec acc[kVectors];
#pragma GCC unroll 24
  for (int v = 0; v < kVectors; ++v)
    acc[v] =
        (kMasked && v == kVectors - 1) ? Simd::LoadMasked(t.c + v * kLanes, t.last_mask) : Simd::Load(t.c + v * kLanes);
  for (std::int64_t s = 0; s < t.count; ++s) {
    const Vec bv = Simd::Broadcast(t.values + s);
    const float* column = t.a + t.steps[s] * t.a_col_stride;
#pragma GCC unroll 24
    for (int v = 0; v < kVectors; ++v) {
      const Vec av = (kMasked && v == kVectors - 1) ? Simd::LoadMasked(column + v * kLanes, t.last_mask)
                                                    : Simd::Load(column + v * kLanes);
      acc[v] = Simd::Fma(av, bv, acc[v]);
    }
  }
#pragma GCC unroll 24
  for (int v = 0; v < kVectors; ++v) {
    if (kMasked && v == kVectors - 1)
      Simd::StoreMasked(t.c + v * kLanes, acc[v], t.last_mask);
    else
      Simd::Store(t.c + v * kLanes, acc[v]);
  }
}

// kRowPanels[masked][vectors - 1], likewise kColumnPanels.
template <bool kMasked, int... kVectorsMinusOne>
constexpr std::array<bool (*)(const PanelArgs&), kMaxPanel> RowPanels(std::integer_sequence<int, kVectorsMinusOne...>) {
  return {&RowPanel<kVectorsMinusOne + 1, kMasked>...};
}
template <bool kMasked, int... kVectorsMinusOne>
constexpr std::array<void (*)(const ColumnArgs&), kMaxPanel> ColumnPanels(
    std::integer_sequence<int, kVectorsMinusOne...>) {
  return {&ColumnPanel<kVectorsMinusOne + 1, kMasked>...};
}
constexpr auto kPanelSizes = std::make_integer_sequence<int, kMaxPanel>();
constexpr std::array<std::array<bool (*)(const PanelArgs&), kMaxPanel>, 2> kRowPanels = {RowPanels<false>(kPanelSizes),
                                                                                         RowPanels<true>(kPanelSizes)};
constexpr std::array<std::array<void (*)(const ColumnArgs&), kMaxPanel>, 2> kColumnPanels = {
    ColumnPanels<false>(kPanelSizes), ColumnPanels<true>(kPanelSizes)};

// Panels of equal width (in vectors), at most `max_vectors` each, covering `columns`.
struct Panels {
  std::int64_t count, vectors;
};
Panels SplitIntoPanels(std::int64_t columns, std::int64_t max_vectors) {
  const std::int64_t vectors = (columns + kLanes - 1) / kLanes;
  const std::int64_t count = (vectors + max_vectors - 1) / max_vectors;
  return {count, (vectors + count - 1) / count};
}

struct Scratch {
  std::vector<std::uint64_t> words;
  std::vector<std::int64_t> counts, steps;
  std::vector<float> values, transposed;
};
Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

}  // namespace

void OrderedGemmSparseA(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row_stride,
                        std::int64_t a_col_stride, const float* b, std::int64_t ldb, float* c, std::int64_t ldc) {
  if (m <= 0 || n < kMinVectors * kLanes || k <= 0 || a_col_stride != 1 || !AllFinite(b, n, ldb, k))
    return OrderedGemm(m, n, k, a, a_row_stride, a_col_stride, b, ldb, c, ldc);
  Scratch& s = ThreadScratch();
  const std::int64_t num_words = (k + 63) / 64;
  s.words.resize(static_cast<std::size_t>(m * num_words));
  std::int64_t non_zero = 0;
  for (std::int64_t i = 0; i < m; ++i) non_zero += NonZeroWords(a + i * a_row_stride, k, &s.words[i * num_words]);
  if (non_zero * 100 > kMaxNonZeroPercent * m * k)
    return OrderedGemm(m, n, k, a, a_row_stride, a_col_stride, b, ldb, c, ldc);

  // Panels of B narrow enough (k x panel) to stay in the level-1 cache.
  const Panels panels = SplitIntoPanels(n, std::clamp<std::int64_t>(16384 / (k * kLanes), 1, kMaxPanel));
  PanelArgs t;
  bool negative_zeros = false;
  t.num_words = num_words;
  t.ldb = ldb;
  for (std::int64_t j0 = 0; j0 < n; j0 += panels.vectors * kLanes) {
    const std::int64_t columns = std::min(panels.vectors * kLanes, n - j0);
    const int vectors = static_cast<int>((columns + kLanes - 1) / kLanes);
    const int tail = static_cast<int>(columns - std::int64_t{vectors - 1} * kLanes);
    t.last_mask = Simd::FirstLanes(tail);
    const auto panel = kRowPanels[tail < kLanes][vectors - 1];
    t.b = b + j0;
    for (std::int64_t i = 0; i < m; ++i) {
      t.words = &s.words[i * num_words];
      t.a = a + i * a_row_stride;
      t.c = c + i * ldc + j0;
      negative_zeros |= panel(t);
    }
  }
  if (negative_zeros) RedoNegativeZeros(m, n, k, a, a_row_stride, a_col_stride, b, ldb, c, ldc);
}

void OrderedGemmSparseB(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row_stride,
                        std::int64_t a_col_stride, const float* b, std::int64_t ldb, float* c, std::int64_t ldc) {
  if (m < kMinVectors * kLanes || n <= 0 || k <= 0 || a_row_stride != 1)
    return OrderedGemm(m, n, k, a, a_row_stride, a_col_stride, b, ldb, c, ldc);
  Scratch& s = ThreadScratch();
  const std::int64_t num_words = (n + 63) / 64;
  s.words.resize(static_cast<std::size_t>(k * num_words));
  // A non-finite A(i, k) facing a zero B[k][j] must make the full chains' NaN. If
  // row k of B has a non-zero entry, that A(i, k) enters a shortened chain too and
  // leaves it non-finite for good (checked on C below); if row k is all zeros, its
  // column of A is checked here.
  std::int64_t non_zero = 0;
  bool finite = true;
  for (std::int64_t kk = 0; kk < k; ++kk) {
    const std::int64_t row = NonZeroWords(b + kk * ldb, n, &s.words[kk * num_words]);
    if (row == 0) finite = finite && AllFinite(a + kk * a_col_stride, m, 0, 1);
    non_zero += row;
  }
  if (non_zero * 100 > kMaxNonZeroPercent * n * k || !finite)
    return OrderedGemm(m, n, k, a, a_row_stride, a_col_stride, b, ldb, c, ldc);

  // C^T (n x m): every chain starts from +0 and is continued block after block.
  s.transposed.assign(static_cast<std::size_t>(n * m), 0.0f);
  s.counts.resize(static_cast<std::size_t>(n));
  s.steps.resize(static_cast<std::size_t>(n * kBlockSteps));
  s.values.resize(static_cast<std::size_t>(n * kBlockSteps));
  // Panels of 144 rows of C: one panel's slice of C^T (n x 144) and of the block's
  // columns of A (kBlockSteps x 144) stay in the level-1 or level-2 cache together.
  const Panels panels = SplitIntoPanels(m, std::clamp<std::int64_t>(144 / kLanes, 1, kMaxPanel));
  ColumnArgs t;
  t.a_col_stride = a_col_stride;
  for (std::int64_t k0 = 0; k0 < k; k0 += kBlockSteps) {
    const std::int64_t k1 = std::min(k, k0 + kBlockSteps);
    // The block's non-zero steps of each column j, in ascending k.
    std::fill(s.counts.begin(), s.counts.end(), std::int64_t{0});
    for (std::int64_t kk = k0; kk < k1; ++kk)
      for (std::int64_t w = 0; w < num_words; ++w)
        for (std::uint64_t bits = s.words[kk * num_words + w]; bits != 0; bits &= bits - 1) {
          const std::int64_t j = w * 64 + std::countr_zero(bits);
          const std::int64_t slot = j * kBlockSteps + s.counts[j]++;
          s.steps[slot] = kk;
          s.values[slot] = b[kk * ldb + j];
        }
    for (std::int64_t i0 = 0; i0 < m; i0 += panels.vectors * kLanes) {
      const std::int64_t rows = std::min(panels.vectors * kLanes, m - i0);
      const int vectors = static_cast<int>((rows + kLanes - 1) / kLanes);
      const int tail = static_cast<int>(rows - std::int64_t{vectors - 1} * kLanes);
      const auto panel = kColumnPanels[tail < kLanes][vectors - 1];
      t.last_mask = Simd::FirstLanes(tail);
      t.a = a + i0;
      for (std::int64_t j = 0; j < n; ++j) {
        if (s.counts[j] == 0) continue;
        t.steps = &s.steps[j * kBlockSteps];
        t.values = &s.values[j * kBlockSteps];
        t.count = s.counts[j];
        t.c = &s.transposed[j * m + i0];
        panel(t);
      }
    }
  }
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = s.transposed[j * m + i];
  if (!AllFinite(s.transposed.data(), n * m, 0, 1))
    return OrderedGemm(m, n, k, a, a_row_stride, a_col_stride, b, ldb, c, ldc);
  RedoNegativeZeros(m, n, k, a, a_row_stride, a_col_stride, b, ldb, c, ldc);
}

}  // namespace dtlab
