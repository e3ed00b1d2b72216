// Manual pages made from the --help text, so that the two never disagree: the
// build runs `dtlab --man-page DIR` and installs what it writes (man1).
//
// The help text has a small fixed shape (cli/command.h, ParseOptions): a "Usage:"
// line, prose, captioned blocks ("Options:", "Model and data:", "Examples:") whose
// entries are a two-space-indented term, two or more spaces, and a description that
// continues on deeper-indented lines. HelpToRoff turns that shape into man(7)
// macros; whatever it does not recognise stays as text (indented lines unfilled),
// so a page never loses a line of the help.
//
// Thread safety: pure functions.
#pragma once

#include <string>

namespace dtlab::cli {

/// The man(7) page `name`(1) (e.g. "dtlab-train") for `help_text` as --help prints
/// it; `summary` is the NAME line's description. Text is escaped for roff (a
/// backslash, a leading dot, option dashes, UTF-8 as \[uXXXX]), so groff renders it
/// without warnings.
std::string HelpToRoff(const std::string& name, const std::string& summary, const std::string& help_text);

/// The first sentence of `text` on one line (line breaks become spaces): a page's
/// summary from a command's description.
std::string FirstSentence(const std::string& text);

}  // namespace dtlab::cli
