// Exact mode's sums over examples (docs/exact.md): each gradient element's exact sum
// of its examples' terms, written as normalized accumulator words
// (core/exact_words.h). Which path a term takes inside these kernels never shows in
// the words: every path adds the exact value.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/layer.h"

namespace dtlab {

/// Scratch memory of SumOuterProducts, reused across calls (one per thread).
struct OuterProductScratch {
  struct Row {
    std::size_t index;  // the row of b
    double a;           // a[row][i]
    double limit;       // the largest b deficit whose products the bins take
  };
  std::vector<double> b;                  // [rows, J padded]: b as double (exact)
  std::vector<double> b_deficit;          // [rows, J padded]: b_max[j] - b's exponent (0 where b is 0)
  std::vector<std::int32_t> row_deficit;  // [rows]: the largest of the row's b_deficit
  std::vector<std::uint8_t> row_finite;   // [rows]: no infinite or NaN b in the row
  std::vector<std::int32_t> b_max;        // [J]
  std::vector<double> bins;               // the two bins and bin 0's constants, [3, J padded]
  std::vector<Row> plain, masked;         // one input row's rows that take the bins
};

/// Rows [begin, end) of an [I, J] parameter's words (element (i, j) at
/// out + (i * J + j) * kExactWords, overwritten): the exact sum of a[e][i] * b[e][j]
/// over the examples e of `terms` (kOuterProducts; counts[c] examples of terms[c]).
void SumOuterProducts(std::span<const ExampleTerms* const> terms, std::span<const std::int64_t> counts,
                      std::int64_t begin, std::int64_t end, std::int64_t* out, OuterProductScratch& scratch);

/// Elements [begin, end) of a parameter's words (element k at out + k * kExactWords,
/// overwritten): the exact sum of values[e][k] over the examples of `terms`
/// (kValues).
void SumValues(std::span<const ExampleTerms* const> terms, std::span<const std::int64_t> counts, std::int64_t begin,
               std::int64_t end, std::int64_t* out);

}  // namespace dtlab
