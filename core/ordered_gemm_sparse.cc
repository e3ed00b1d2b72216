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

#include <Eigen/Core>

#include "core/ordered_gemm.h"
#include "core/ordered_simd.h"
#include "core/transpose.h"

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

// Rows of B (A's columns) per block of the B kernel (a column's steps in a block are
// one 32-bit mask): the block's columns of A stay in the level-1 cache while every
// column of C walks over them.
constexpr std::int64_t kBlockSteps = 32;

// Non-zero bits of row[0 .. n) into words (bit b of words[w]: element 64 w + b; a
// NaN is not zero); returns how many.
std::int64_t NonZeroWords(const float* row, std::int64_t n, std::uint64_t* words) {
  std::int64_t count = 0;
  for (std::int64_t w0 = 0; w0 < n; w0 += 64) {
    std::uint64_t word = 0;  // kept in a register, stored once
    for (std::int64_t j = w0; j < std::min(n, w0 + 64); j += kLanes) {
      const int lanes = static_cast<int>(std::min<std::int64_t>(kLanes, n - j));
      const Vec v = lanes == kLanes ? Simd::Load(row + j) : Simd::LoadMasked(row + j, Simd::FirstLanes(lanes));
      word |= std::uint64_t{Simd::NonZeroBits(v)} << (j - w0);  // kLanes divides 64
    }
    words[w0 / 64] = word;
    count += std::popcount(word);
  }
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
  const float* a;  // A(i, 0) of the row
  const float* b;  // B[0][j0]
  std::int64_t ldb;
  float* c;  // C[i][j0], or where the row's panel is added
  Mask last_mask;
};

// A kernel: one row of C, kVectors vectors from j0, in registers; each non-zero
// A(i, k) in ascending k broadcasts against kVectors vectors of row k of B. Then
// the panel is stored (returns whether it holds a -0), or with kAdd added to what
// c holds (returns false).
template <int kVectors, bool kMasked, bool kAdd>
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
    float* p = t.c + v * kLanes;
    const bool last = kMasked && v == kVectors - 1;
    if constexpr (kAdd) {
      const Vec sum = Simd::Add(last ? Simd::LoadMasked(p, t.last_mask) : Simd::Load(p), acc[v]);
      if (last)
        Simd::StoreMasked(p, sum, t.last_mask);
      else
        Simd::Store(p, sum);
    } else {
      negative_zeros |= Simd::NegativeZeroBits(acc[v]);
      if (last)
        Simd::StoreMasked(p, acc[v], t.last_mask);
      else
        Simd::Store(p, acc[v]);
    }
  }
  return negative_zeros != 0;
}

// A (m x k) column by column, for the B kernel: A(i, kk) = columns[kk][Offset(i)]
// with Offset(i) = i / segment * segment_stride + i % segment. A column-major A is
// one segment as long as a column; a convolution's patch matrix read in place
// (SegmentedRows, as A's transpose) has one per kernel row.
struct AColumns {
  const float* const* columns;
  std::int64_t segment, segment_stride;
  std::int64_t Offset(std::int64_t i) const { return i / segment * segment_stride + i % segment; }
  float At(std::int64_t i, std::int64_t kk) const { return columns[kk][Offset(i)]; }
  bool ColumnFinite(std::int64_t kk, std::int64_t m) const {
    for (std::int64_t i0 = 0; i0 < m; i0 += segment)
      if (!AllFinite(columns[kk] + Offset(i0), std::min(segment, m - i0), 0, 1)) return false;
    return true;
  }
};

// B kernel: one column j of C, kVectors vectors of rows from i0, continued from the
// chains in c (C transposed, so a column is contiguous); each step k of the block
// whose bit is set in `mask` (B[k][j] is not zero) broadcasts B[k][j] against
// kVectors vectors of column k of A (from columns[k] + offset: a panel never
// straddles a segment).
struct ColumnArgs {
  std::uint32_t mask;  // bit s: step k0 + s
  std::int64_t k0;
  const float* b;  // B[0][j]
  std::int64_t ldb;
  const float* const* columns;
  std::int64_t offset;
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
  for (std::uint32_t bits = t.mask; bits != 0; bits &= bits - 1) {
    const std::int64_t kk = t.k0 + std::countr_zero(bits);
    const Vec bv = Simd::Broadcast(t.b + kk * t.ldb);
    const float* column = t.columns[kk] + t.offset;
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

using RowPanelFunction = bool (*)(const PanelArgs&);
using ColumnPanelFunction = void (*)(const ColumnArgs&);

// kRowPanels[add][masked][vectors - 1], kColumnPanels[masked][vectors - 1].
template <bool kMasked, bool kAdd, int... kVectorsMinusOne>
constexpr std::array<RowPanelFunction, kMaxPanel> RowPanels(std::integer_sequence<int, kVectorsMinusOne...>) {
  return {&RowPanel<kVectorsMinusOne + 1, kMasked, kAdd>...};
}
template <bool kMasked, int... kVectorsMinusOne>
constexpr std::array<ColumnPanelFunction, kMaxPanel> ColumnPanels(std::integer_sequence<int, kVectorsMinusOne...>) {
  return {&ColumnPanel<kVectorsMinusOne + 1, kMasked>...};
}
constexpr auto kPanelSizes = std::make_integer_sequence<int, kMaxPanel>();
constexpr std::array<std::array<std::array<RowPanelFunction, kMaxPanel>, 2>, 2> kRowPanels = {
    {{RowPanels<false, false>(kPanelSizes), RowPanels<true, false>(kPanelSizes)},
     {RowPanels<false, true>(kPanelSizes), RowPanels<true, true>(kPanelSizes)}}};
constexpr std::array<std::array<ColumnPanelFunction, kMaxPanel>, 2> kColumnPanels = {ColumnPanels<false>(kPanelSizes),
                                                                                     ColumnPanels<true>(kPanelSizes)};

// Panels of equal width (in vectors), at most `max_vectors` each, covering `columns`.
struct Panels {
  std::int64_t count, vectors;
};
Panels SplitIntoPanels(std::int64_t columns, std::int64_t max_vectors) {
  const std::int64_t vectors = (columns + kLanes - 1) / kLanes;
  const std::int64_t count = (vectors + max_vectors - 1) / max_vectors;
  return {count, (vectors + count - 1) / count};
}

// Panels that each lie in one segment of `segment` columns, all whole vectors: the
// segment's vectors, if they fit the registers; count 0 if not.
Panels SegmentPanels(std::int64_t columns, std::int64_t segment) {
  if (segment <= 0 || segment % kLanes != 0 || segment / kLanes > kMaxPanel || columns % segment != 0) return {0, 0};
  return {columns / segment, segment / kLanes};
}

struct Scratch {
  std::vector<std::uint64_t> words;
  std::vector<std::uint32_t> masks;
  std::vector<const float*> columns;
  // 64-byte aligned: the column kernel loads and stores its accumulators here, and a
  // vector split across two cache lines costs two.
  std::vector<float, Eigen::aligned_allocator<float>> transposed;
};
Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// The non-zero bits of A's rows into s.words; false (the full chains are faster) if
// more than kMaxNonZeroPercent of A is non-zero.
bool FindNonZeroRows(std::int64_t m, std::int64_t k, const float* a, std::int64_t a_row_stride, Scratch& s) {
  const std::int64_t num_words = (k + 63) / 64;
  s.words.resize(static_cast<std::size_t>(m * num_words));
  std::int64_t non_zero = 0;
  for (std::int64_t i = 0; i < m; ++i) non_zero += NonZeroWords(a + i * a_row_stride, k, &s.words[i * num_words]);
  return non_zero * 100 <= kMaxNonZeroPercent * m * k;
}

// The B kernel over A's columns; false (C unspecified) where the full chains must
// run instead: B not mostly zeros, or a non-finite value in A.
bool SparseBColumns(std::int64_t m, std::int64_t n, std::int64_t k, const AColumns& a, const Panels& panels,
                    const float* b, std::int64_t ldb, float* c, std::int64_t ldc) {
  Scratch& s = ThreadScratch();
  // masks[block][j], bit s: B[k0 + s][j] is not zero (a NaN is not zero); a loop the
  // compiler vectorizes across j.
  const std::int64_t blocks = (k + kBlockSteps - 1) / kBlockSteps;
  s.masks.assign(static_cast<std::size_t>(blocks * n), 0u);
  std::int64_t non_zero = 0;
  for (std::int64_t block = 0; block < blocks; ++block) {
    std::uint32_t* masks = &s.masks[static_cast<std::size_t>(block * n)];
    const std::int64_t k0 = block * kBlockSteps, steps = std::min(kBlockSteps, k - k0);
    for (std::int64_t step = 0; step < steps; ++step) {
      const float* row = b + (k0 + step) * ldb;
      const std::uint32_t bit = std::uint32_t{1} << step;
      for (std::int64_t j = 0; j < n; ++j) masks[j] |= row[j] != 0.0f ? bit : 0u;
    }
    std::uint32_t any = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      any |= masks[j];
      non_zero += std::popcount(masks[j]);
    }
    // A non-finite A(i, k) facing a zero B[k][j] must make the full chains' NaN. If
    // row k of B has a non-zero entry, that A(i, k) enters a shortened chain too and
    // leaves it non-finite for good (checked on C below); if row k is all zeros, its
    // column of A is checked here.
    for (std::int64_t step = 0; step < steps; ++step)
      if ((any >> step & 1u) == 0 && !a.ColumnFinite(k0 + step, m)) return false;
  }
  if (non_zero * 100 > kMaxNonZeroPercent * n * k) return false;

  // C^T (n x m): every chain starts from +0 and is continued block after block.
  s.transposed.assign(static_cast<std::size_t>(n * m), 0.0f);
  ColumnArgs t;
  t.columns = a.columns;
  t.ldb = ldb;
  for (std::int64_t block = 0; block < blocks; ++block) {
    const std::uint32_t* masks = &s.masks[static_cast<std::size_t>(block * n)];
    t.k0 = block * kBlockSteps;
    for (std::int64_t i0 = 0; i0 < m; i0 += panels.vectors * kLanes) {
      const std::int64_t rows = std::min(panels.vectors * kLanes, m - i0);
      const int vectors = static_cast<int>((rows + kLanes - 1) / kLanes);
      const int tail = static_cast<int>(rows - std::int64_t{vectors - 1} * kLanes);
      const auto panel = kColumnPanels[tail < kLanes][vectors - 1];
      t.last_mask = Simd::FirstLanes(tail);
      t.offset = a.Offset(i0);
      for (std::int64_t j = 0; j < n; ++j) {
        if (masks[j] == 0) continue;
        t.mask = masks[j];
        t.b = b + j;
        t.c = &s.transposed[j * m + i0];
        panel(t);
      }
    }
  }
  if (!AllFinite(s.transposed.data(), n * m, 0, 1)) return false;
  TransposeRows([&](std::int64_t j) { return s.transposed.data() + j * m; }, n, m, c, ldc);
  // The chains that ended at -0 (they need an underflow) computed again as full
  // chains (see the top); one pass that vectorizes finds whether there are any.
  std::uint32_t negative_zero = 0;
  for (const float x : s.transposed) negative_zero |= std::bit_cast<std::uint32_t>(x) == 0x80000000u ? 1u : 0u;
  if (negative_zero == 0) return true;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float& out = c[i * ldc + j];
      if (std::bit_cast<std::uint32_t>(out) != 0x80000000u) continue;
      float acc = 0.0f;
      for (std::int64_t kk = 0; kk < k; ++kk) acc = std::fma(a.At(i, kk), b[kk * ldb + j], acc);
      out = acc;
    }
  return true;
}

}  // namespace

void OrderedGemmSparseA(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row_stride,
                        std::int64_t a_col_stride, const float* b, std::int64_t ldb, float* c, std::int64_t ldc) {
  Scratch& s = ThreadScratch();
  if (m <= 0 || n < kMinVectors * kLanes || k <= 0 || a_col_stride != 1 || !AllFinite(b, n, ldb, k) ||
      !FindNonZeroRows(m, k, a, a_row_stride, s))
    return OrderedGemm(m, n, k, a, a_row_stride, a_col_stride, b, ldb, c, ldc);

  // Panels of B narrow enough (k x panel) to stay in the level-1 cache.
  const Panels panels = SplitIntoPanels(n, std::clamp<std::int64_t>(16384 / (k * kLanes), 1, kMaxPanel));
  const std::int64_t num_words = (k + 63) / 64;
  PanelArgs t;
  bool negative_zeros = false;
  t.num_words = num_words;
  t.ldb = ldb;
  for (std::int64_t j0 = 0; j0 < n; j0 += panels.vectors * kLanes) {
    const std::int64_t columns = std::min(panels.vectors * kLanes, n - j0);
    const int vectors = static_cast<int>((columns + kLanes - 1) / kLanes);
    const int tail = static_cast<int>(columns - std::int64_t{vectors - 1} * kLanes);
    t.last_mask = Simd::FirstLanes(tail);
    const auto panel = kRowPanels[false][tail < kLanes][vectors - 1];
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

bool OrderedGemmSparseAAddToSegmentedRows(std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                                          std::int64_t lda, const float* b, std::int64_t ldb,
                                          const SegmentedOutputRows& out) {
  const Panels panels = SegmentPanels(n, out.segment);
  Scratch& s = ThreadScratch();
  if (m <= 0 || k <= 0 || panels.count == 0 || !AllFinite(b, n, ldb, k) || !FindNonZeroRows(m, k, a, lda, s))
    return false;
  // Segments in descending order, rows in ascending order within each: for every
  // output element, the order in which col2im adds its terms (core/ordered_gemm.h).
  // Leaving out a zero step can only turn a +0 of C into -0, and adding -0 or +0 to
  // a sum that started from +0 gives the same bits (such a sum is never -0), so no
  // element needs computing again. A row of A without a non-zero entry adds +0s:
  // nothing to do.
  const std::int64_t num_words = (k + 63) / 64;
  const auto panel = kRowPanels[true][false][panels.vectors - 1];
  PanelArgs t;
  t.num_words = num_words;
  t.ldb = ldb;
  for (std::int64_t segment = panels.count - 1; segment >= 0; --segment) {
    t.b = b + segment * out.segment;
    for (std::int64_t i = 0; i < m; ++i) {
      t.words = &s.words[i * num_words];
      if (std::all_of(t.words, t.words + num_words, [](std::uint64_t w) { return w == 0; })) continue;
      t.a = a + i * lda;
      t.c = out.rows[i] + segment * out.segment_stride;
      panel(t);
    }
  }
  return true;
}

void OrderedGemmSparseB(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row_stride,
                        std::int64_t a_col_stride, const float* b, std::int64_t ldb, float* c, std::int64_t ldc) {
  if (m < kMinVectors * kLanes || n <= 0 || k <= 0 || a_row_stride != 1)
    return OrderedGemm(m, n, k, a, a_row_stride, a_col_stride, b, ldb, c, ldc);
  Scratch& s = ThreadScratch();
  s.columns.resize(static_cast<std::size_t>(k));
  for (std::int64_t kk = 0; kk < k; ++kk) s.columns[static_cast<std::size_t>(kk)] = a + kk * a_col_stride;
  // Panels of 144 rows of C: one panel's slice of C^T (n x 144) and of the block's
  // columns of A (kBlockSteps x 144) stay in the level-1 or level-2 cache together.
  const Panels panels = SplitIntoPanels(m, std::clamp<std::int64_t>(144 / kLanes, 1, kMaxPanel));
  if (!SparseBColumns(m, n, k, {s.columns.data(), m, 0}, panels, b, ldb, c, ldc))
    OrderedGemm(m, n, k, a, a_row_stride, a_col_stride, b, ldb, c, ldc);
}

bool OrderedGemmSparseBSegmentedColumns(std::int64_t m, std::int64_t n, std::int64_t k, const SegmentedRows& a_columns,
                                        const float* b, std::int64_t ldb, float* c, std::int64_t ldc) {
  const Panels panels = SegmentPanels(m, a_columns.segment);
  if (m <= 0 || n <= 0 || k <= 0 || panels.count == 0) return false;
  return SparseBColumns(m, n, k, {a_columns.rows, a_columns.segment, a_columns.segment_stride}, panels, b, ldb, c, ldc);
}

}  // namespace dtlab
