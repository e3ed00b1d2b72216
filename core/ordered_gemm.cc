#include "core/ordered_gemm.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/ordered_simd.h"

// Why every path gives the same bits: the vector code runs one output column per
// lane, so each lane performs exactly the scalar chain acc = fma(A(i,k), B[k][j], acc)
// for k ascending, starting from +0 (not from A(i,0)*B[0][j], which would differ when
// that product is -0). No sum is ever split or reassociated. Blocking over k only
// stores the float accumulator into C and loads it back for the next k block, which
// is the same float the chain would carry in a register.

namespace dtlab {
namespace {

using ordered_simd::kLanes;
using ordered_simd::Mask;
using ordered_simd::Simd;
using ordered_simd::Vec;
constexpr int kMaxRows = Simd::RowsFor(1);

// How A(i, k) is addressed. Column-major (unit row stride: the rows of one k are
// adjacent) needs one pointer for the whole tile; row-major (unit column stride)
// one per row, indexed by k; row pointers the same with each row's pointer taken
// from a table (segmented rows, within one segment); anything else the general form.
enum class ALayout { kColumnMajor, kRowMajor, kStrided, kRowPointers };

struct TileArgs {
  std::int64_t k;  // chain steps in this k block
  const float* a;  // A(i0, k0)
  std::int64_t a_row_stride, a_col_stride;
  const float* b;  // B[k0][j0]
  std::int64_t ldb;
  float* c;  // C[i0][j0]
  std::int64_t ldc;
  Mask last_mask;   // lanes of the last vector that are inside C (when kMasked)
  bool accumulate;  // continue the chains from C (a later k block) instead of +0
  // kRowPointers: row r of the tile starts at a_pointers[r] + a_offset.
  const float* const* a_pointers;
  std::int64_t a_offset;
  // The epilogue, on the last k block only: bias at bias[j0] (or null), then ReLU.
  const float* bias;
  bool relu;
};

// C[i0 .. i0+kRows) x [j0 .. j0 + kVectors vectors) in registers, kRows x kVectors
// independent chains per lane: each k step loads kVectors vectors of row k of B and
// broadcasts kRows values of A.
template <int kRows, int kVectors, bool kMasked, ALayout kLayout>
void Tile(const TileArgs& t) {
  Vec acc[kRows][kVectors];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      const float* p = t.c + r * t.ldc + v * kLanes;
      if (!t.accumulate)
        acc[r][v] = Simd::Zero();
      else if (kMasked && v == kVectors - 1)
        acc[r][v] = Simd::LoadMasked(p, t.last_mask);
      else
        acc[r][v] = Simd::Load(p);
    }
  }

  const float* a_rows[kRows];
  for (int r = 0; r < kRows; ++r)
    a_rows[r] = kLayout == ALayout::kRowPointers ? t.a_pointers[r] + t.a_offset : t.a + r * t.a_row_stride;
  const float* a = t.a;
  const float* b = t.b;
  for (std::int64_t kk = 0; kk < t.k; ++kk) {
    Vec bv[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v)
      bv[v] =
          (kMasked && v == kVectors - 1) ? Simd::LoadMasked(b + v * kLanes, t.last_mask) : Simd::Load(b + v * kLanes);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const float* ap = kLayout == ALayout::kColumnMajor ? a + r
                        : kLayout == ALayout::kRowMajor || kLayout == ALayout::kRowPointers
                            ? a_rows[r] + kk
                            : a_rows[r] + kk * t.a_col_stride;
      const Vec av = Simd::Broadcast(ap);
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) acc[r][v] = Simd::Fma(av, bv[v], acc[r][v]);
    }
    a += t.a_col_stride;
    b += t.ldb;
  }

  if (t.bias != nullptr || t.relu) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      Vec bias = Simd::Zero();
      if (t.bias != nullptr)
        bias = (kMasked && v == kVectors - 1) ? Simd::LoadMasked(t.bias + v * kLanes, t.last_mask)
                                              : Simd::Load(t.bias + v * kLanes);
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) {
        if (t.bias != nullptr) acc[r][v] = Simd::Add(acc[r][v], bias);
        if (t.relu) acc[r][v] = Simd::Relu(acc[r][v]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      float* p = t.c + r * t.ldc + v * kLanes;
      if (kMasked && v == kVectors - 1)
        Simd::StoreMasked(p, acc[r][v], t.last_mask);
      else
        Simd::Store(p, acc[r][v]);
    }
  }
}

using TileFunction = void (*)(const TileArgs&);

// kTiles[layout][masked][vectors - 1][rows - 1]; null where the tile would not fit
// in registers (never requested).
template <int kVectors, bool kMasked, ALayout kLayout, int... kRowsMinusOne>
constexpr std::array<TileFunction, kMaxRows> RowTable(std::integer_sequence<int, kRowsMinusOne...>) {
  return {
      (kRowsMinusOne < Simd::RowsFor(kVectors) ? &Tile<kRowsMinusOne + 1, kVectors, kMasked, kLayout> : nullptr)...};
}
template <bool kMasked, ALayout kLayout, int... kVectorsMinusOne>
constexpr std::array<std::array<TileFunction, kMaxRows>, Simd::kMaxVectors> VectorTable(
    std::integer_sequence<int, kVectorsMinusOne...>) {
  return {RowTable<kVectorsMinusOne + 1, kMasked, kLayout>(std::make_integer_sequence<int, kMaxRows>())...};
}
template <ALayout kLayout>
constexpr std::array<std::array<std::array<TileFunction, kMaxRows>, Simd::kMaxVectors>, 2> MaskTable() {
  constexpr auto vectors = std::make_integer_sequence<int, Simd::kMaxVectors>();
  return {VectorTable<false, kLayout>(vectors), VectorTable<true, kLayout>(vectors)};
}
constexpr std::array<std::array<std::array<std::array<TileFunction, kMaxRows>, Simd::kMaxVectors>, 2>, 4> kTiles = {
    MaskTable<ALayout::kColumnMajor>(), MaskTable<ALayout::kRowMajor>(), MaskTable<ALayout::kStrided>(),
    MaskTable<ALayout::kRowPointers>()};

// Vectors per panel of C: the widest tile, unless a narrower one divides the
// columns into full panels (n = 288 is 18 vectors: six panels of 3, not 4+4+4+4+2).
int PanelVectors(std::int64_t column_vectors) {
  if (column_vectors <= Simd::kMaxVectors) return static_cast<int>(column_vectors);
  for (int v = Simd::kMaxVectors; v >= std::max(2, Simd::kMaxVectors - 1); --v)
    if (column_vectors % v == 0) return v;
  return Simd::kMaxVectors;
}

// Chain steps per k block: the panel of B one block reads (k x panel width) stays in
// the level-2 cache while every row tile of C streams past it. Blocks are of equal
// size so that no block is a sliver. A constant, never read from the CPU: and the
// bits do not depend on it anyway (a block boundary only stores the float chain
// into C and loads it back). CI's portable build sets another value to prove that
// (scripts/ci-portable.sh).
#ifndef DTLAB_ORDERED_GEMM_K_BLOCK
#define DTLAB_ORDERED_GEMM_K_BLOCK 512
#endif
constexpr std::int64_t kMaxKBlock = DTLAB_ORDERED_GEMM_K_BLOCK;
static_assert(kMaxKBlock >= 1, "DTLAB_ORDERED_GEMM_K_BLOCK must be positive");

// Where A's values are read from: strides, or segmented rows.
struct ASource {
  const float* a = nullptr;
  std::int64_t row_stride = 0, col_stride = 0;
  const SegmentedRows* segmented = nullptr;
};

// The epilogue alone, for an empty chain (k == 0: C is +0 before it).
void ZeroWithEpilogue(std::int64_t m, std::int64_t n, float* c, std::int64_t ldc, const GemmEpilogue& epilogue) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float v = 0.0f;
      if (epilogue.bias != nullptr) v += epilogue.bias[j];
      if (epilogue.relu) v = v > 0.0f ? v : 0.0f;
      c[i * ldc + j] = v;
    }
}

void Gemm(std::int64_t m, std::int64_t n, std::int64_t k, const ASource& source, const float* b, std::int64_t ldb,
          float* c, std::int64_t ldc, const GemmEpilogue& epilogue) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return ZeroWithEpilogue(m, n, c, ldc, epilogue);
  const ALayout layout = source.segmented != nullptr ? ALayout::kRowPointers
                         : source.row_stride == 1    ? ALayout::kColumnMajor
                         : source.col_stride == 1    ? ALayout::kRowMajor
                                                     : ALayout::kStrided;
  const auto& tiles = kTiles[static_cast<int>(layout)];
  const int panel_vectors = PanelVectors((n + kLanes - 1) / kLanes);
  const std::int64_t panel_columns = std::int64_t{panel_vectors} * kLanes;
  const int tile_rows = Simd::RowsFor(panel_vectors);
  // k blocks of equal size; segmented rows cut them at every segment's end too.
  const std::int64_t span = source.segmented != nullptr ? std::max<std::int64_t>(source.segmented->segment, 1) : k;
  const std::int64_t blocks_per_span = (span + kMaxKBlock - 1) / kMaxKBlock;
  const std::int64_t k_block = (span + blocks_per_span - 1) / blocks_per_span;

  // Panels of C outermost within a k block: one panel of B (k_block x panel width)
  // serves every row tile, and A is broadcast straight from where it lies (no
  // packing: on the model's shapes packing A would cost as much as the k = 9 product).
  for (std::int64_t k0 = 0; k0 < k;) {
    const std::int64_t in_span = k0 % span;  // where k0 lies in its segment
    TileArgs t;
    t.k = std::min({k_block, span - in_span, k - k0});
    t.a_row_stride = source.row_stride;
    t.a_col_stride = source.col_stride;
    t.ldb = ldb;
    t.ldc = ldc;
    t.accumulate = k0 > 0;
    t.a_pointers = nullptr;
    t.a_offset = 0;
    if (source.segmented != nullptr) t.a_offset = k0 / span * source.segmented->segment_stride + in_span;
    const bool last = k0 + t.k == k;
    t.relu = last && epilogue.relu;
    for (std::int64_t j0 = 0; j0 < n; j0 += panel_columns) {
      const std::int64_t columns = std::min(panel_columns, n - j0);
      const int vectors = static_cast<int>((columns + kLanes - 1) / kLanes);
      const int tail = static_cast<int>(columns - std::int64_t{vectors - 1} * kLanes);
      const bool masked = tail < kLanes;
      t.last_mask = Simd::FirstLanes(tail);
      t.bias = last && epilogue.bias != nullptr ? epilogue.bias + j0 : nullptr;
      const auto& row_tiles = tiles[masked][vectors - 1];
      t.b = b + k0 * ldb + j0;
      for (std::int64_t i0 = 0; i0 < m; i0 += tile_rows) {
        const int rows = static_cast<int>(std::min<std::int64_t>(tile_rows, m - i0));
        if (source.segmented != nullptr)
          t.a_pointers = source.segmented->rows + i0;
        else
          t.a = source.a + i0 * source.row_stride + k0 * source.col_stride;
        t.c = c + i0 * ldc + j0;
        row_tiles[rows - 1](t);
      }
    }
    k0 += t.k;
  }
}

}  // namespace

void OrderedGemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row_stride,
                 std::int64_t a_col_stride, const float* b, std::int64_t ldb, float* c, std::int64_t ldc) {
  Gemm(m, n, k, {a, a_row_stride, a_col_stride, nullptr}, b, ldb, c, ldc, {});
}

void OrderedGemmWithEpilogue(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row_stride,
                             std::int64_t a_col_stride, const float* b, std::int64_t ldb, float* c, std::int64_t ldc,
                             const GemmEpilogue& epilogue) {
  Gemm(m, n, k, {a, a_row_stride, a_col_stride, nullptr}, b, ldb, c, ldc, epilogue);
}

void OrderedGemmSegmentedA(std::int64_t m, std::int64_t n, std::int64_t k, const SegmentedRows& a, const float* b,
                           std::int64_t ldb, float* c, std::int64_t ldc, const GemmEpilogue& epilogue) {
  Gemm(m, n, k, {nullptr, 0, 1, &a}, b, ldb, c, ldc, epilogue);
}

void OrderedGemmReference(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row_stride,
                          std::int64_t a_col_stride, const float* b, std::int64_t ldb, float* c, std::int64_t ldc) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (std::int64_t kk = 0; kk < k; ++kk)
        acc = std::fma(a[i * a_row_stride + kk * a_col_stride], b[kk * ldb + j], acc);
      c[i * ldc + j] = acc;
    }
}

}  // namespace dtlab
