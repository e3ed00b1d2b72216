#include "sim/engines/reference_check.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace dtlab {
namespace {

// Maps a float to an integer that increases with its value (+0 and -0 both to 0).
std::int64_t OrderedBits(float x) {
  const auto bits = static_cast<std::int64_t>(std::bit_cast<std::int32_t>(x));
  return bits < 0 ? -(bits & 0x7fffffff) : bits;
}

}  // namespace

std::int64_t UlpDistance(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return (std::isnan(a) && std::isnan(b)) ? 0 : std::numeric_limits<std::int64_t>::max();
  const std::int64_t d = OrderedBits(a) - OrderedBits(b);
  return d < 0 ? -d : d;
}

VariableCheck CompareWithBound(std::string name, std::span<const float> distributed, std::span<const float> reference,
                               std::span<const float> magnitudes, double additions, std::span<const float> extra) {
  VariableCheck check;
  check.name = std::move(name);
  double dot = 0, norm = 0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const double d = distributed[i], r = reference[i];
    const double diff = std::abs(d - r);
    const double magnitude = magnitudes.empty() ? 0.0 : magnitudes.size() == 1 ? magnitudes[0] : magnitudes[i];
    const double bound = 1.01 * additions * kFloatUnitRoundoff * magnitude + (extra.empty() ? 0.0 : extra[i]);
    double fraction = bound > 0 ? diff / bound : (diff == 0 ? 0.0 : std::numeric_limits<double>::infinity());
    if (std::isnan(diff)) fraction = std::numeric_limits<double>::infinity();
    check.max_abs_diff =
        std::max(check.max_abs_diff, std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff);
    check.max_ulp = std::max(check.max_ulp, UlpDistance(distributed[i], reference[i]));
    check.max_bound_fraction = std::max(check.max_bound_fraction, fraction);
    dot += d * r;
    norm += r * r;
  }
  check.scale = norm > 0 ? dot / norm : 1.0;
  check.within_bound = check.max_bound_fraction <= 1.0;
  return check;
}

VariableCheck CompareBitwise(std::string name, std::span<const float> distributed, std::span<const float> reference) {
  VariableCheck check = CompareWithBound(std::move(name), distributed, reference, std::span<const float>(), 0.0);
  double dot = 0, norm = 0;
  check.max_bound_fraction = 0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(distributed[i]) != std::bit_cast<std::uint32_t>(reference[i]))
      ++check.values_differing;
    dot += static_cast<double>(distributed[i]) * reference[i];
    norm += static_cast<double>(reference[i]) * reference[i];
  }
  check.scale = norm > 0 ? dot / norm : 1.0;
  check.within_bound = check.values_differing == 0;
  return check;
}

void StepCheck::Summarize() {
  within_bound = loss.within_bound && per_example_values_identical;
  max_abs_diff = loss.max_abs_diff;
  max_ulp = loss.max_ulp;
  max_bound_fraction = loss.max_bound_fraction;
  const VariableCheck* worst = loss.within_bound ? nullptr : &loss;
  for (const auto& v : variables) {
    within_bound &= v.within_bound;
    max_abs_diff = std::max(max_abs_diff, v.max_abs_diff);
    max_ulp = std::max(max_ulp, v.max_ulp);
    max_bound_fraction = std::max(max_bound_fraction, v.max_bound_fraction);
    if (!v.within_bound && (!worst || v.max_bound_fraction > worst->max_bound_fraction ||
                            (exact && v.values_differing > worst->values_differing)))
      worst = &v;
  }
  explanation.clear();
  if (!per_example_values_identical)
    explanation = "per-example losses differ from the reference's: the kernels are not batch-invariant";
  if (!worst) return;
  char text[256];
  const double s = worst->scale;
  if (exact && !(s > 1.5 || (s > 0 && s < 1 / 1.5))) {
    std::snprintf(text, sizeof text, "%s: %lld of its values differ from the reference's bits, by up to %lld ULP",
                  worst->name.c_str(), static_cast<long long>(worst->values_differing),
                  static_cast<long long>(worst->max_ulp));
    explanation += (explanation.empty() ? "" : "; ") + std::string(text);
    return;
  }
  if (s > 1.5 || (s > 0 && s < 1 / 1.5))
    std::snprintf(text, sizeof text, "%s is %.3g times the reference (%s by a factor of %.3g)", worst->name.c_str(), s,
                  s > 1 ? "too large" : "too small", s > 1 ? s : 1 / s);
  else
    std::snprintf(text, sizeof text, "%s differs from the reference by up to %.3g (%.3g times its bound)",
                  worst->name.c_str(), worst->max_abs_diff, worst->max_bound_fraction);
  explanation += (explanation.empty() ? "" : "; ") + std::string(text);
}

}  // namespace dtlab
