// Transposing float matrices in 8 x 8 blocks of vector shuffles. An element at a
// time, one side's accesses are strided and stall on every element; a block of
// eight rows read as eight vectors and written as eight is as fast as a copy.
// Pure data movement: the same bits on every machine.
#pragma once

#include <cstdint>

namespace dtlab {

/// dst[c * ld + r] = row(r)[c] for r < rows, c < cols, where row(r) returns a
/// pointer to row r's cols floats (rows may lie anywhere). dst must not overlap them.
template <typename RowAt>
void TransposeRows(RowAt row, std::int64_t rows, std::int64_t cols, float* dst, std::int64_t ld) {
  using V8 = float __attribute__((vector_size(32), aligned(4), may_alias));
  const std::int64_t rows8 = rows / 8 * 8, cols8 = cols / 8 * 8;
  for (std::int64_t r0 = 0; r0 < rows8; r0 += 8) {
    const float* in[8];
    for (int k = 0; k < 8; ++k) in[k] = row(r0 + k);
    for (std::int64_t c0 = 0; c0 < cols8; c0 += 8) {
      V8 x[8], a[8], b[8];
      for (int k = 0; k < 8; ++k) x[k] = *reinterpret_cast<const V8*>(in[k] + c0);
      for (int k = 0; k < 8; k += 2) {  // pairs of rows interleaved
        a[k] = __builtin_shufflevector(x[k], x[k + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        a[k + 1] = __builtin_shufflevector(x[k], x[k + 1], 2, 10, 3, 11, 6, 14, 7, 15);
      }
      for (int k = 0; k < 8; k += 4)  // then pairs of those
        for (int h = 0; h < 2; ++h) {
          b[k + 2 * h] = __builtin_shufflevector(a[k + h], a[k + 2 + h], 0, 1, 8, 9, 4, 5, 12, 13);
          b[k + 2 * h + 1] = __builtin_shufflevector(a[k + h], a[k + 2 + h], 2, 3, 10, 11, 6, 7, 14, 15);
        }
      for (int k = 0; k < 4; ++k) {  // then the 128-bit halves
        *reinterpret_cast<V8*>(dst + (c0 + k) * ld + r0) =
            __builtin_shufflevector(b[k], b[4 + k], 0, 1, 2, 3, 8, 9, 10, 11);
        *reinterpret_cast<V8*>(dst + (c0 + 4 + k) * ld + r0) =
            __builtin_shufflevector(b[k], b[4 + k], 4, 5, 6, 7, 12, 13, 14, 15);
      }
    }
  }
  // The edges: the last cols % 8 columns of the blocked rows, and the last rows % 8 rows.
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = row(r);
    for (std::int64_t c = r < rows8 ? cols8 : 0; c < cols; ++c) dst[c * ld + r] = in[c];
  }
}

}  // namespace dtlab
