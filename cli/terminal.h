// The terminal dtlab prints to: how wide it is, and whether to colour.
//
// Width: COLUMNS when it holds a number, else the size of the terminal on stdout
// (ioctl TIOCGWINSZ), else 80. Output that goes to a file or a pipe, with COLUMNS
// unset, is not fitted at all (FitWidth() is 0): its tables keep their full width,
// which is what the golden files hold.
//
// Colour (--color auto|always|never, and the NO_COLOR convention): auto colours only when
// stdout is a terminal and NO_COLOR is unset or empty; always colours even into a
// file; never does not colour.
#pragma once

#include <cstdio>
#include <string>

#include <boost/program_options.hpp>

#include "core/status.h"

namespace dtlab::cli {

/// The output's width in columns: COLUMNS (a number from 20 up; smaller counts as
/// 20), else the terminal's on stdout, else 80.
int TerminalColumns();

/// The width output must fit: TerminalColumns() when stdout is a terminal or COLUMNS
/// is set; 0 (no limit: tables as wide as they need) otherwise.
int FitWidth();

enum class ColorMode { kAuto, kAlways, kNever };

/// "auto", "always" or "never"; InvalidArgument naming --color otherwise.
StatusOr<ColorMode> ParseColorMode(const std::string& text);

/// Whether output on stdout is coloured in `mode` (see above).
bool UseColor(ColorMode mode);

/// A stream that passes whole lines to `out`, each line wider than `width` columns
/// word-wrapped (scenarios/text_table.h, WrapLines), and flushes `out` after each.
/// Width 0 passes everything through. Close it (fclose) before `out`; nullptr when
/// the stream cannot be made.
std::FILE* OpenFittedStream(std::FILE* out, int width);

/// `line` cut at its last space so that it fits `width` columns (never inside a
/// word; a first word longer than `width` stays whole). Width 0: unchanged.
std::string FitLine(const std::string& line, int width);

/// Adds --color WHEN (default auto) to `options`, storing the text in `*value`.
void AddColorFlag(boost::program_options::options_description& options, std::string* value);

/// Reads --color's text: whether to colour, or InvalidArgument (exit 2).
StatusOr<bool> ColorFromFlag(const std::string& value);

}  // namespace dtlab::cli
