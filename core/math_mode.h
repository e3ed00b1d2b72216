// How dtlab computes sums: fast (float sums, each a chain in a fixed order, checked
// against a rigorous error bound) or exact (ordered kernels and int64 fixed-point
// accumulators, so N replicas give the bits one device gives; docs/exact.md).
#pragma once

#include <string_view>

#include "core/enum_names.h"

namespace dtlab {

enum class MathMode { kFast, kExact };

inline constexpr NameTable<MathMode, 2> kMathModes = {{{"fast", MathMode::kFast}, {"exact", MathMode::kExact}}};

/// "fast" or "exact" (case-insensitive); InvalidArgument listing both otherwise.
inline StatusOr<MathMode> ParseMathMode(std::string_view name) { return ParseEnumName(name, kMathModes, "math mode"); }
inline std::string_view MathModeName(MathMode mode) { return EnumName(mode, kMathModes); }

}  // namespace dtlab
