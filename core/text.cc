#include "core/text.h"

#include <cstdint>
#include <cstdio>
#include <string>

namespace dtlab {
namespace {

// The length of the valid UTF-8 sequence at text[i] and its code point, or 0 when
// the bytes there are not valid UTF-8 (overlong forms, surrogates and code points
// past U+10FFFF included).
std::size_t DecodeUtf8(std::string_view text, std::size_t i, std::uint32_t* code_point) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  std::size_t length;
  std::uint32_t value;
  unsigned char low = 0x80, high = 0xbf;  // the range of the byte after the lead
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2, value = lead & 0x1fu;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3, value = lead & 0x0fu;
    if (lead == 0xe0) low = 0xa0;   // overlong
    if (lead == 0xed) high = 0x9f;  // surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4, value = lead & 0x07u;
    if (lead == 0xf0) low = 0x90;   // overlong
    if (lead == 0xf4) high = 0x8f;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    const unsigned char next = byte(i + k);
    if (next < (k == 1 ? low : 0x80) || next > (k == 1 ? high : 0xbf)) return 0;
    value = (value << 6) | (next & 0x3fu);
  }
  *code_point = value;
  return length;
}

bool IsInvisibleControl(std::uint32_t c) {
  return (c >= 0x80 && c <= 0x9f) || c == 0x200e || c == 0x200f || (c >= 0x202a && c <= 0x202e) ||
         (c >= 0x2066 && c <= 0x2069) || c == 0x2028 || c == 0x2029 || c == 0xfeff;
}

void AppendEscape(std::string& out, const char* format, unsigned value) {
  char code[12];
  std::snprintf(code, sizeof code, format, value);
  out += code;
}

}  // namespace

std::string EscapeControl(std::string_view text, bool keep_line_breaks) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if ((c >= 0x20 && c != 0x7f) || (keep_line_breaks && (c == '\n' || c == '\t')))
        out += static_cast<char>(c);
      else
        AppendEscape(out, "\\x%02x", c);
      ++i;
      continue;
    }
    std::uint32_t code_point = 0;
    const std::size_t length = DecodeUtf8(text, i, &code_point);
    if (length == 0) {
      AppendEscape(out, "\\x%02x", c);
      ++i;
    } else {
      if (IsInvisibleControl(code_point))
        AppendEscape(out, "\\u%04x", code_point);
      else
        out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

bool IsTerminalSafe(std::string_view text, bool keep_line_breaks) {
  return EscapeControl(text, keep_line_breaks) == text;
}

std::string IdRangesText(std::span<const std::int32_t> ids, std::size_t max_ranges) {
  std::string text;
  std::size_t ranges = 0, i = 0;
  while (i < ids.size()) {
    std::size_t end = i + 1;
    while (end < ids.size() && ids[end] == ids[end - 1] + 1) ++end;
    if (end - i == 2) end = i + 1;  // two in a row read better as "2, 3"
    // Appended piece by piece: GCC 12 warns about "x" + std::string here (-Wrestrict,
    // a false positive).
    if (ranges == max_ranges) {
      text.append(", ... and ").append(std::to_string(ids.size() - i)).append(" more (");
      text.append(std::to_string(ids.size())).append(" in all)");
      break;
    }
    if (ranges != 0) text.append(", ");
    text.append(std::to_string(ids[i]));
    if (end - i > 1) text.append("-").append(std::to_string(ids[end - 1]));
    ++ranges;
    i = end;
  }
  return text;
}

std::string Printable(std::string_view text, std::size_t max_chars) {
  std::string out = EscapeControl(text);
  if (out.size() <= max_chars) return out;
  std::size_t cut = max_chars;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xc0u) == 0x80u) --cut;  // not inside a character
  out.resize(cut);
  return out + "...";
}

std::string JsonNestingError(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        return "nests deeper than " + std::to_string(max_depth) + " levels (at byte " + std::to_string(i) + ")";
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return {};
}

}  // namespace dtlab
