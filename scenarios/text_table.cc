#include "scenarios/text_table.h"

#include <algorithm>
#include <sstream>

namespace dtlab {
namespace {

constexpr const char* kReset = "\033[0m";

const char* AnsiCode(Tone tone) {
  switch (tone) {
    case Tone::kPass:
      return "\033[32m";
    case Tone::kFail:
      return "\033[1;31m";
    case Tone::kPitfall:
      return "\033[33m";
    case Tone::kBold:
      return "\033[1m";
    case Tone::kDim:
      return "\033[2m";
    case Tone::kPlain:
      break;
  }
  return "";
}

// The layout the fitting tries: which columns, which headers, how wide each is.
struct Layout {
  std::vector<std::size_t> columns;  // indices into TextTable::columns, in order
  std::vector<std::size_t> widths;   // per shown column
  bool short_headers = false;
  bool wrapped = false;  // wrap columns may be narrower than their widest cell
};

const std::string& HeaderOf(const TableColumn& column, bool short_header) {
  return short_header && !column.short_header.empty() ? column.short_header : column.header;
}

Tone ToneOf(const TextTable& table, std::size_t row, std::size_t column) {
  if (row >= table.tones.size() || column >= table.tones[row].size()) return Tone::kPlain;
  return table.tones[row][column];
}

const std::string& Cell(const TextTable& table, std::size_t row, std::size_t column) {
  static const std::string kEmpty;
  return column < table.rows[row].size() ? table.rows[row][column] : kEmpty;
}

std::size_t LongestWord(const std::string& text) {
  std::size_t longest = 0;
  std::istringstream words(text);
  for (std::string word; words >> word;) longest = std::max(longest, VisibleWidth(word));
  return longest;
}

// Natural widths of the shown columns: the widest of header and cells.
Layout Natural(const TextTable& table, std::vector<std::size_t> columns, bool short_headers) {
  Layout layout{std::move(columns), {}, short_headers, false};
  for (const std::size_t c : layout.columns) {
    std::size_t width = VisibleWidth(HeaderOf(table.columns[c], short_headers));
    for (std::size_t r = 0; r < table.rows.size(); ++r) width = std::max(width, VisibleWidth(Cell(table, r, c)));
    layout.widths.push_back(width);
  }
  return layout;
}

std::size_t TotalWidth(const TextTable& table, const Layout& layout) {
  std::size_t total = table.indent.size();
  for (const std::size_t w : layout.widths) total += w;
  return total + 2 * (layout.widths.empty() ? 0 : layout.widths.size() - 1);
}

// Narrows the wrap columns (never below their longest word) until the layout fits
// `width`; false when it cannot.
bool NarrowWrapColumns(const TextTable& table, Layout& layout, std::size_t width) {
  std::vector<std::size_t> least(layout.columns.size(), 0);
  for (std::size_t i = 0; i < layout.columns.size(); ++i) {
    const std::size_t c = layout.columns[i];
    least[i] = table.columns[c].wrap ? LongestWord(HeaderOf(table.columns[c], layout.short_headers)) : layout.widths[i];
    for (std::size_t r = 0; table.columns[c].wrap && r < table.rows.size(); ++r)
      least[i] = std::max(least[i], LongestWord(Cell(table, r, c)));
  }
  for (std::size_t total = TotalWidth(table, layout); total > width;) {
    std::size_t best = layout.columns.size();
    for (std::size_t i = 0; i < layout.columns.size(); ++i)
      if (layout.widths[i] > least[i] &&
          (best == layout.columns.size() || layout.widths[i] - least[i] > layout.widths[best] - least[best]))
        best = i;
    if (best == layout.columns.size()) return false;
    const std::size_t cut = std::min(total - width, layout.widths[best] - least[best]);
    layout.widths[best] -= cut;
    total -= cut;
    layout.wrapped = true;
  }
  return true;
}

// One row (or the header, row == npos) laid out: its lines, each ending in "\n".
std::string RenderRow(const TextTable& table, const Layout& layout, std::size_t row, bool color) {
  std::vector<std::vector<std::string>> cells;
  std::size_t height = 1;
  for (std::size_t i = 0; i < layout.columns.size(); ++i) {
    const std::size_t c = layout.columns[i];
    const std::string& text =
        row == std::string::npos ? HeaderOf(table.columns[c], layout.short_headers) : Cell(table, row, c);
    cells.push_back(layout.wrapped && table.columns[c].wrap ? WrapWords(text, static_cast<int>(layout.widths[i]))
                                                            : std::vector<std::string>{text});
    height = std::max(height, cells.back().size());
  }
  std::string out;
  for (std::size_t line = 0; line < height; ++line) {
    std::string text = table.indent;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::string piece = line < cells[i].size() ? cells[i][line] : "";
      const Tone tone = row == std::string::npos ? Tone::kPlain : ToneOf(table, row, layout.columns[i]);
      text += Paint(piece, tone, color);
      if (i + 1 < cells.size()) text += std::string(layout.widths[i] - VisibleWidth(piece) + 2, ' ');
    }
    // Wrapped rows can leave the last columns empty: no trailing blanks then.
    if (layout.wrapped) text.erase(text.find_last_not_of(' ') + 1);
    out += text + "\n";
  }
  return out;
}

FittedTable Render(const TextTable& table, const Layout& layout, bool color, std::size_t width) {
  FittedTable fitted;
  fitted.header = RenderRow(table, layout, std::string::npos, color);
  for (std::size_t r = 0; r < table.rows.size(); ++r) fitted.rows.push_back(RenderRow(table, layout, r, color));
  std::string left_out;
  for (std::size_t c = 0; c < table.columns.size(); ++c)
    if (std::find(layout.columns.begin(), layout.columns.end(), c) == layout.columns.end())
      left_out += (left_out.empty() ? "" : ", ") + table.columns[c].header;
  if (!left_out.empty())
    fitted.note =
        WrapLines(table.indent + "(left out to fit " + std::to_string(width) + " columns: " + left_out + ")\n",
                  static_cast<int>(width), 1);
  return fitted;
}

// One block per row: the first cell, then "header: value" for the others.
FittedTable Stacked(const TextTable& table, bool color, std::size_t width) {
  FittedTable fitted;
  fitted.stacked = true;
  const std::string inner = table.indent + "  ";
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    std::string block;
    for (std::size_t c = 0; c < table.columns.size(); ++c) {
      const std::string label = table.columns[c].header + ": ";
      const std::string& prefix = c == 0 ? table.indent : inner;
      const std::string pad(prefix.size() + label.size(), ' ');
      const auto lines = WrapWords(Cell(table, r, c), static_cast<int>(width - std::min(width - 1, pad.size())));
      for (std::size_t i = 0; i < lines.size(); ++i)
        block += (i == 0 ? prefix + label : pad) + Paint(lines[i], ToneOf(table, r, c), color) + "\n";
    }
    fitted.rows.push_back(block);
  }
  return fitted;
}

}  // namespace

std::string Paint(const std::string& text, Tone tone, bool color) {
  if (!color || tone == Tone::kPlain || text.empty()) return text;
  return AnsiCode(tone) + text + kReset;
}

std::size_t VisibleWidth(std::string_view text) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\033') {
      while (i < text.size() && text[i] != 'm') ++i;
      continue;
    }
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++width;
  }
  return width;
}

std::string StripAnsi(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\033') {
      while (i < text.size() && text[i] != 'm') ++i;
      continue;
    }
    out += text[i];
  }
  return out;
}

std::vector<std::string> WrapWords(const std::string& text, int width) {
  std::vector<std::string> lines;
  std::string line;
  std::istringstream words(text);
  for (std::string word; words >> word;) {
    if (!line.empty() && width > 0 && VisibleWidth(line) + 1 + VisibleWidth(word) > static_cast<std::size_t>(width)) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty() || lines.empty()) lines.push_back(line);
  return lines;
}

std::string WrapLines(const std::string& text, int width, int hang) {
  if (width <= 0) return text;
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (VisibleWidth(line) <= static_cast<std::size_t>(width)) {
      out += line + "\n";
      continue;
    }
    const std::size_t indent = std::min(line.find_first_not_of(' '), line.size());
    const std::string rest(indent + static_cast<std::size_t>(std::max(hang, 0)), ' ');
    std::string current(line.substr(0, indent));
    bool empty = true;
    std::istringstream words(line.substr(indent));
    for (std::string word; words >> word;) {
      if (!empty && VisibleWidth(current) + 1 + VisibleWidth(word) > static_cast<std::size_t>(width)) {
        out += current + "\n";
        current = rest;
        empty = true;
      }
      current += (empty ? "" : " ") + word;
      empty = false;
    }
    out += current + "\n";
  }
  if (!text.empty() && text.back() != '\n' && !out.empty()) out.pop_back();
  return out;
}

std::string HangText(const std::string& prefix, const std::string& text, int width) {
  const std::size_t indent = VisibleWidth(prefix);
  const auto lines = WrapWords(text, width > 0 ? std::max(20, width - static_cast<int>(indent)) : 0);
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) out += (i == 0 ? prefix : std::string(indent, ' ')) + lines[i] + "\n";
  return out;
}

FittedTable FitTable(const TextTable& table, int width, bool color) {
  std::vector<std::size_t> shown;
  for (std::size_t c = 0; c < table.columns.size(); ++c) shown.push_back(c);
  const auto limit = static_cast<std::size_t>(std::max(width, 0));
  Layout layout = Natural(table, shown, false);
  if (width <= 0 || TotalWidth(table, layout) <= limit) return Render(table, layout, color, limit);
  layout = Natural(table, shown, true);
  if (TotalWidth(table, layout) <= limit) return Render(table, layout, color, limit);
  std::vector<std::size_t> droppable;
  for (std::size_t c = 0; c < table.columns.size(); ++c)
    if (table.columns[c].drop_rank > 0) droppable.push_back(c);
  std::stable_sort(droppable.begin(), droppable.end(), [&](std::size_t a, std::size_t b) {
    return table.columns[a].drop_rank < table.columns[b].drop_rank;
  });
  for (const std::size_t c : droppable) {
    shown.erase(std::find(shown.begin(), shown.end(), c));
    layout = Natural(table, shown, true);
    if (TotalWidth(table, layout) <= limit) return Render(table, layout, color, limit);
  }
  if (NarrowWrapColumns(table, layout, limit)) return Render(table, layout, color, limit);
  return Stacked(table, color, limit);
}

std::string RenderTable(const TextTable& table, int width, bool color) {
  const FittedTable fitted = FitTable(table, width, color);
  std::string out = fitted.header;
  for (const std::string& row : fitted.rows) out += row;
  return out + fitted.note;
}

}  // namespace dtlab
