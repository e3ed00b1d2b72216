// Numbers read from text, files or flags, checked in their real type before use
// (docs/architecture.md, "Habits": integers range-checked before any narrowing). One helper for every
// integer field: fault specs, scenario and lesson keys, command-line options.
//
// Thread safety: pure functions.
#pragma once

#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "core/status.h"

namespace dtlab {

/// "[min, max]" written out, e.g. "[0, 2147483647]".
template <std::integral Int>
std::string IntegerRangeText(Int min, Int max) {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) about "[" + std::string&&.
  std::string text = "[";
  text += std::to_string(min);
  text += ", ";
  text += std::to_string(max);
  text += "]";
  return text;
}

/// Parses the whole of `text` (decimal digits, an optional leading '-' or '+') into
/// Int, refusing anything else and any value outside [min, max], including values
/// that do not fit Int at all (never wraps). On failure: InvalidArgument
/// "<what> must be an integer in [MIN, MAX], got 'TEXT'".
template <std::integral Int>
StatusOr<Int> ParseInteger(std::string_view text, std::string_view what, Int min = std::numeric_limits<Int>::min(),
                           Int max = std::numeric_limits<Int>::max()) {
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') {
    digits.remove_prefix(1);
    if (!digits.empty() && digits.front() == '-') digits = {};  // "+-1"
  }
  // A sign before an unsigned type would otherwise be read as a huge value by
  // some parsers; from_chars refuses it, and so do we (with the range in the message).
  Int value{};
  const char* end = digits.data() + digits.size();
  const auto [stop, error] = std::from_chars(digits.data(), end, value);
  if (digits.empty() || error != std::errc() || stop != end || value < min || value > max)
    return Status::InvalidArgument(std::string(what) + " must be an integer in " + IntegerRangeText(min, max) +
                                   ", got '" + std::string(text) + "'");
  return value;
}

/// Narrows an int64 (a TOML integer, a JSON number) into Int after checking it is
/// in [min, max]. InvalidArgument "<what> must be in [MIN, MAX], got VALUE".
template <std::integral Int>
StatusOr<Int> NarrowInteger(std::int64_t value, std::string_view what, Int min = std::numeric_limits<Int>::min(),
                            Int max = std::numeric_limits<Int>::max()) {
  if (!std::in_range<Int>(value) || static_cast<Int>(value) < min || static_cast<Int>(value) > max)
    return Status::InvalidArgument(std::string(what) + " must be in " + IntegerRangeText(min, max) + ", got " +
                                   std::to_string(value));
  return static_cast<Int>(value);
}

/// Ok for a finite value; InvalidArgument "<what> must be a finite number, got nan"
/// otherwise. Every floating-point option and file field goes through it.
inline Status CheckFinite(double value, std::string_view what) {
  if (std::isfinite(value)) return Status::Ok();
  return Status::InvalidArgument(std::string(what) + " must be a finite number, got " +
                                 (std::isnan(value) ? "nan"
                                  : value > 0       ? "inf"
                                                    : "-inf"));
}

/// A relative tolerance (scenario checks and lesson questions share this rule):
/// finite and 0 or more. InvalidArgument "<what> must be a non-negative number (a
/// relative error: 0.05 allows 5%), got X" otherwise.
Status CheckRelativeTolerance(double value, std::string_view what);

/// a * b, or nothing when the product overflows int64.
inline std::optional<std::int64_t> CheckedMultiply(std::int64_t a, std::int64_t b) {
  std::int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

}  // namespace dtlab
