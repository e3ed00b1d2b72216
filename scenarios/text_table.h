// Text for a terminal: tables that fit a width, words wrapped without breaking one,
// and ANSI colour for outcomes (PASS green, FAIL red, an expected failure, the
// pitfall a lesson predicts, in its own colour).
//
// Width 0 means "as wide as the text needs": a table is then laid out exactly as it
// always was (columns left-aligned, two spaces apart), which keeps the golden files
// of output that is not on a terminal byte for byte. The command line decides the
// width and whether to colour (cli/terminal.h); nothing here reads the environment.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dtlab {

/// How a piece of text is coloured on a terminal.
enum class Tone {
  kPlain,
  kPass,     // green: a check passed, a verdict as expected
  kFail,     // red: a check failed that should have passed, a verdict not as expected
  kPitfall,  // yellow: a failure the scenario predicts (the pitfall, as expected)
  kBold,
  kDim,
};

/// `text` wrapped in the ANSI codes of `tone` when `color` (and the tone is not
/// plain); otherwise `text` unchanged.
std::string Paint(const std::string& text, Tone tone, bool color);

/// Columns `text` takes on a terminal: UTF-8 code points outside ANSI escapes.
std::size_t VisibleWidth(std::string_view text);

/// `text` without its ANSI escape sequences.
std::string StripAnsi(std::string_view text);

/// Word-wraps plain `text` into lines of at most `width` columns, breaking at
/// spaces only: a word longer than `width` stands alone on its line, unbroken.
/// `width` <= 0: one line.
std::vector<std::string> WrapWords(const std::string& text, int width);

/// Each line of `text` longer than `width` columns, word-wrapped; continuation lines
/// start with the line's own indentation plus `hang` spaces. Width <= 0: unchanged.
std::string WrapLines(const std::string& text, int width, int hang = 2);

/// `prefix` (a padded first column) and `text` word-wrapped beside it, each further
/// line indented as wide as `prefix`, "\n" after each; the text gets at least 20
/// columns. Width <= 0: prefix + text on one line.
std::string HangText(const std::string& prefix, const std::string& text, int width);

struct TableColumn {
  std::string header;
  std::string short_header;  // shown when the table must shrink (empty: the header)
  int drop_rank = 0;         // 0: always shown; else left out when too wide, rank 1 first
  bool wrap = false;         // its cells may wrap at spaces onto more lines
};

struct TextTable {
  std::vector<TableColumn> columns;
  std::vector<std::vector<std::string>> rows;  // plain text, one cell per column
  std::vector<std::vector<Tone>> tones;        // per row and cell; missing cells are plain
  std::string indent = "  ";
};

/// A table laid out for a width: its header and each row as whole lines ("\n"
/// after each), so that callers can print more under a row.
struct FittedTable {
  std::string header;             // empty in the stacked layout
  std::vector<std::string> rows;  // one entry per row, one or more lines each
  std::string note;               // "(left out to fit N columns: ...)" or empty
  bool stacked = false;
};

/// Lays `table` out in `width` columns, the first of these that fits: (1) as wide
/// as it needs (always, when width is 0); (2) with the short headers; (3) leaving
/// out columns by drop_rank, one at a time; (4) wrapping the wrap columns' cells at
/// spaces; (5) stacked: one block per row, a "header: value" line per cell (nothing
/// left out). Never breaks inside a word. With `color`, each cell in its tone.
FittedTable FitTable(const TextTable& table, int width, bool color);

/// FitTable's header, rows and note, one after another.
std::string RenderTable(const TextTable& table, int width, bool color);

}  // namespace dtlab
