// Small text helpers shared by the modules that write messages and tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace dtlab {

/// The items of `range` as text (`to_text(item)` each), separated by `separator`.
template <typename Range, typename ToText>
std::string JoinText(const Range& range, std::string_view separator, ToText to_text) {
  std::string out;
  for (const auto& item : range) {
    if (!out.empty()) out += separator;
    out += to_text(item);
  }
  return out;
}

/// The items of `range` (strings or string views), separated by `separator`.
template <typename Range>
std::string JoinText(const Range& range, std::string_view separator) {
  return JoinText(range, separator, [](const auto& item) { return std::string(item); });
}

/// `text` without the spaces, tabs, carriage returns and line feeds at its ends.
inline std::string_view Trim(std::string_view text) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

/// Text from a file, fit for a terminal, a table or JSON: valid UTF-8 with nothing
/// that could act on the terminal or reorder what it shows. Control characters
/// (C0 but, with `keep_line_breaks`, newline and tab; DEL; C1), the bidirectional
/// controls (U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), the line and paragraph
/// separators (U+2028, U+2029) and U+FEFF are written as "\u202e"; a byte that is
/// not part of valid UTF-8 as "\xff". Everything else, accents and CJK included,
/// is kept. Text that needs no escape comes back unchanged.
std::string EscapeControl(std::string_view text, bool keep_line_breaks = false);

/// `text` when EscapeControl would keep it as is.
bool IsTerminalSafe(std::string_view text, bool keep_line_breaks = false);

/// EscapeControl(text), cut to at most `max_chars` bytes at a character boundary,
/// with "..." when cut: a value from a file, quoted in a message.
std::string Printable(std::string_view text, std::size_t max_chars = 60);

/// Ascending ids as ranges, for a message: {0, 1, 2, 5, 7, 8} is "0-2, 5, 7, 8" (runs
/// of three or more as ranges). Past `max_ranges` items the rest is counted:
/// "0, 2, 4, ... and 47 more (50 in all)".
std::string IdRangesText(std::span<const std::int32_t> ids, std::size_t max_ranges = 12);

/// Empty when JSON `text` nests objects and arrays at most `max_depth` deep; else
/// what is wrong ("nests deeper than 3 levels (at byte 17)"). Run before a JSON
/// parser sees untrusted text: nlohmann's values copy and compare recursively,
/// and a file of 100 000 '[' would overflow the stack.
std::string JsonNestingError(std::string_view text, int max_depth);

}  // namespace dtlab
