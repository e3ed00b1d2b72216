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
  std::vector<float> a;                   // [input rows of the task, rows]: a transposed
  std::vector<const float*> a_rows;       // [rows]: each row of a, from the task's first input
  std::vector<const float*> b_rows;       // [rows]: each row of b (J values)
  std::vector<double> b;                  // [rows, J padded]: b as double (exact)
  std::vector<double> b_deficit;          // [rows, J padded]: b_max[j] - b's exponent (0 where b is 0)
  std::vector<std::int32_t> row_deficit;  // [rows]: the largest of the row's b_deficit
  std::vector<std::uint8_t> row_finite;   // [rows]: no infinite or NaN b in the row
  std::vector<std::int32_t> b_max;        // [J]
  std::vector<double> bins;               // the two bins and bin 0's constants, [3, J padded]
  std::vector<Row> plain, masked;         // one input row's rows that take the bins (plain: [rows], a count)
  struct FarRow {
    float a;
    const float* b;  // the row of b, J values
  };
  std::vector<FarRow> far;                // one input row's rows whose products all go to the words
  std::vector<std::uint8_t> needs_words;  // [J]: the column's sum needs its words
  std::vector<float> t, sums;  // [J padded]: one input row's regularization terms, and sums rounded from the bins
  std::vector<std::uint8_t> sums_ok;  // [J padded]: sums[j] is the rounded sum
};

/// Where the sum kernels put a parameter's sums, and the regularization term they
/// add to each (element k counted from the parameter's first).
struct SumOutput {
  /// Element k's words at words + k * kExactWords.
  std::int64_t* words = nullptr;
  /// Nonzero: element k's sum also gets RegularizationTerm(coefficient, weights[k]).
  float coefficient = 0.0f;
  const float* weights = nullptr;
  /// Null: every element's words are overwritten with its sum, normalized. Else
  /// rounded[k] gets the sum correctly rounded to float (ExactToFloat of those
  /// words), and the words are overwritten only where the kernel needs them: at
  /// least wherever rounded[k] is not finite (so they tell which terms were
  /// infinite or NaN); elsewhere their contents are unspecified. A sum that the
  /// double bins hold alone, and that rounds to a finite float, is rounded from the
  /// bins without touching its 152 bytes of words.
  float* rounded = nullptr;
};

/// The regularization gradient's term of one element, scale * l2 * (2 * w) in float
/// as Sequential::AddRegularizationGradient computes it, coefficient = scale * l2.
inline float RegularizationTerm(float coefficient, float w) { return coefficient * (w * 2.0f); }

/// Rows [begin, end) of an [I, J] parameter (element (i, j) is k = i * J + j): the
/// exact sum of a[e][i] * b[e][j] over the examples e of `terms` (kOuterProducts;
/// counts[c] examples of terms[c]), plus the regularization term, as `out` says.
void SumOuterProducts(std::span<const ExampleTerms* const> terms, std::span<const std::int64_t> counts,
                      std::int64_t begin, std::int64_t end, const SumOutput& out, OuterProductScratch& scratch);

/// Elements [begin, end) of a parameter: the exact sum of values[e][k] over the
/// examples of `terms` (kValues), plus the regularization term, as `out` says.
void SumValues(std::span<const ExampleTerms* const> terms, std::span<const std::int64_t> counts, std::int64_t begin,
               std::int64_t end, const SumOutput& out);

}  // namespace dtlab
