// Names of enum values on the command line and in files: one table per enum, one
// way to parse and print them, one error message.
//
//   constexpr NameTable<Convention, 2> kConventions = {{{"tf", Convention::kTf}, {"ddp", Convention::kDdp}}};
//   StatusOr<Convention> c = ParseEnumName(text, kConventions, "convention");
//   std::string_view name = EnumName(Convention::kTf, kConventions);
#pragma once

#include <array>
#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "core/status.h"

namespace dtlab {

template <typename Enum, std::size_t N>
using NameTable = std::array<std::pair<std::string_view, Enum>, N>;

/// The value whose name equals `name`, ignoring case; otherwise InvalidArgument
/// "unknown <what> '<name>' (expected one of: a, b, c)".
template <typename Enum, std::size_t N>
StatusOr<Enum> ParseEnumName(std::string_view name, const NameTable<Enum, N>& table, std::string_view what) {
  auto equal_ignoring_case = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
        return false;
    return true;
  };
  std::string names;
  for (const auto& [text, value] : table) {
    if (equal_ignoring_case(text, name)) return value;
    names += (names.empty() ? "" : ", ") + std::string(text);
  }
  return Status::InvalidArgument("unknown " + std::string(what) + " '" + std::string(name) +
                                 "' (expected one of: " + names + ")");
}

/// The name of `value` in `table` ("?" if the table lacks it).
template <typename Enum, std::size_t N>
std::string_view EnumName(Enum value, const NameTable<Enum, N>& table) {
  for (const auto& [text, v] : table)
    if (v == value) return text;
  return "?";
}

}  // namespace dtlab
