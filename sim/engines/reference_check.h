// Comparing a distributed step with the one-device reference, in ULPs and against a
// rigorous floating-point bound (DESIGN.md, "Exact reference math").
//
// The distributed run and the reference compute bitwise-identical per-example
// values (every output is one chain over its own row; the check verifies it on the
// per-example losses). They differ only in how the per-example terms are summed:
// which chunks, which replicas, which all-reduce order. Both are float sums of the
// same n terms x_i, so with u = 2^-24 and h the longest chain of additions a term
// passes through, each is within h*u*sum|x_i| of the exact sum (Higham, ch. 3-4;
// Rump, Bunger and Jeannerod 2016), and
//     |distributed - reference| <= (h_distributed + h_reference) * u * sum|x_i|.
// sum|x_i| comes from BatchRunner's gradient magnitudes; h counts every term of
// the reduction (each chunk counted as `chunk_size` rows, an over-count for a short
// one), the chunk sums and the replica sums, so
// it is an upper bound whatever the order. The bound is widened by 1% to cover the
// rounding of sum|x_i| itself.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dtlab {

inline constexpr double kFloatUnitRoundoff = 0x1p-24;

/// Number of representable floats between a and b (0 when equal; +0 and -0 are
/// equal). NaN against anything else counts as the largest distance.
std::int64_t UlpDistance(float a, float b);

/// The comparison of one variable's gradient (or the loss) with the reference.
struct VariableCheck {
  std::string name;
  double max_abs_diff = 0;
  std::int64_t max_ulp = 0;
  double max_bound_fraction = 0;  // max |d - r| / bound over elements (infinite if bound 0 and d != r)
  double scale = 1;               // least-squares factor s minimizing |d - s*r|: "d is s times r"
  bool within_bound = true;
  std::int64_t values_differing = 0;  // elements whose bits differ from the reference's
};

/// Compares `distributed` with `reference` element by element; `magnitudes[i]` is
/// sum|x_i| for element i (one entry, or one per element) and `additions` the
/// total h_distributed + h_reference. `extra[i]` (empty: none) is added to element
/// i's bound: errors the float32 chains do not count (a mixed policy's roundings).
VariableCheck CompareWithBound(std::string name, std::span<const float> distributed, std::span<const float> reference,
                               std::span<const float> magnitudes, double additions, std::span<const float> extra = {});

/// Exact mode's comparison: equal means bit for bit (within_bound is set to
/// "every element has the reference's bits"; +0 and -0 differ here).
VariableCheck CompareBitwise(std::string name, std::span<const float> distributed, std::span<const float> reference);

/// Every variable of one step, and the loss.
struct StepCheck {
  std::int64_t step = 0;
  std::vector<VariableCheck> variables;
  VariableCheck loss;
  bool per_example_values_identical = true;  // the per-example losses matched bit for bit
  bool exact = false;                        // exact mode: the check is bitwise equality
  bool within_bound = true;                  // every variable and the loss (exact: bitwise equal)
  double max_abs_diff = 0, max_bound_fraction = 0;
  std::int64_t max_ulp = 0;
  std::string explanation;                          // a sentence saying why it failed (empty when it passed)
  double distributed_norm = 0, reference_norm = 0;  // L2 norms of the whole gradients
  /// Folds the variables and the loss into the step's maxima and verdict.
  void Summarize();
};

}  // namespace dtlab
