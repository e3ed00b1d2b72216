#include "cli/man_page.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>
#include <vector>

namespace dtlab::cli {
namespace {

// A UTF-8 sequence at `at` as roff's \[uXXXX]; advances `at` past it. A malformed
// byte becomes U+FFFD, so the page stays valid whatever the help holds.
std::string Utf8Escape(const std::string& text, std::size_t& at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  const int extra = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : -1;
  unsigned code = extra == 3 ? lead & 0x07u : extra == 2 ? lead & 0x0Fu : lead & 0x1Fu;
  bool ok = extra > 0;
  for (int i = 1; ok && i <= extra; ++i) {
    const std::size_t next = at + static_cast<std::size_t>(i);
    if (next >= text.size() || (byte(next) & 0xC0) != 0x80) {
      ok = false;
    } else {
      code = (code << 6) | (byte(next) & 0x3Fu);
    }
  }
  at += ok ? static_cast<std::size_t>(extra) + 1 : 1;
  if (!ok) code = 0xFFFD;
  char out[16];
  std::snprintf(out, sizeof(out), "\\[u%04X]", code);
  return out;
}

// `text` escaped for roff. `code`: every '-' is a minus (options, commands); in
// prose only the dashes that start a word are (--epochs), hyphens stay hyphens.
std::string Escape(const std::string& text, bool code) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      out += Utf8Escape(text, i);
      continue;
    }
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-' && (code || i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1])))) {
      out += "\\-";
    } else if (c == '\t') {
      out += ' ';
    } else if (static_cast<unsigned char>(c) < 0x20) {
      // control characters have no place in a page
    } else {
      out += c;
    }
    ++i;
  }
  // A line may not start with a control character ('.' or '\'').
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out = "\\&" + out;
  return out;
}

std::size_t Indent(const std::string& line) {
  const std::size_t first = line.find_first_not_of(' ');
  return first == std::string::npos ? line.size() : first;
}

std::string Trim(const std::string& text) {
  const std::size_t first = text.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

// "Options:", "Model and data:": a short line at the margin ending with ':'.
bool IsCaption(const std::string& line) {
  return !line.empty() && line.size() <= 40 && line.back() == ':' && std::isupper(static_cast<unsigned char>(line[0]));
}

std::string Upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

// An entry's term in bold, its argument ("arg (=10)") in roman.
std::string Term(const std::string& term) {
  const std::size_t arg = term.find(" arg");
  if (arg == std::string::npos) return "\\fB" + Escape(term, true) + "\\fR";
  return "\\fB" + Escape(term.substr(0, arg), true) + "\\fR" + Escape(term.substr(arg), true);
}

}  // namespace

std::string FirstSentence(const std::string& text) {
  std::string line;
  for (const char c : text) line += c == '\n' ? ' ' : c;
  // The sentence ends at ". " ("e.g. x" does not end one), or before its first ": "
  // (what follows a colon is detail, too long for a NAME line).
  std::size_t end = line.find(": ");
  for (std::size_t at = line.find(". "); at != std::string::npos; at = line.find(". ", at + 1)) {
    if (at >= 3 && line.compare(at - 3, 3, "e.g") == 0) continue;
    end = std::min(end, at);
    break;
  }
  return Trim(end == std::string::npos ? line : line.substr(0, end));
}

std::string HelpToRoff(const std::string& name, const std::string& summary, const std::string& help_text) {
  std::vector<std::string> lines;
  std::istringstream in(help_text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);

  std::string out = ".TH " + Escape(Upper(name), true) + " 1 \"\" \"dtlab 0.1.0\" \"dtlab manual\"\n";
  out += ".SH NAME\n" + Escape(name, true) + " \\- " + Escape(summary, false) + "\n";
  enum class Section { kStart, kSynopsis, kProse, kEntries, kExamples } section = Section::kStart;
  bool unfilled = false;  // inside .nf
  bool entry_open = false;
  auto fill = [&] {
    if (unfilled) out += ".fi\n", unfilled = false;
  };
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (i == 0 && line.rfind("Usage:", 0) != 0) continue;  // "dtlab - ...": the NAME line says it
    if (line.rfind("Usage: ", 0) == 0) {
      fill();
      const std::string usage = line.substr(7);
      const std::size_t space = usage.find(' ', usage.find(' ') + 1);
      out += ".SH SYNOPSIS\n.B " + Escape(usage.substr(0, space), true) + "\n";
      if (space != std::string::npos) out += Escape(usage.substr(space + 1), true) + "\n";
      section = Section::kSynopsis;
      continue;
    }
    if (Trim(line).empty()) {
      fill();
      entry_open = false;
      if (section == Section::kSynopsis) {
        out += ".SH DESCRIPTION\n";
        section = Section::kProse;
      } else if (section != Section::kStart && out.compare(out.size() - 4, 4, ".PP\n") != 0) {
        out += ".PP\n";
      }
      continue;
    }
    if (IsCaption(line)) {
      fill();
      entry_open = false;
      const std::string title = line.substr(0, line.size() - 1);
      if (title == "Examples") {
        out += ".SH EXAMPLES\n", section = Section::kExamples;
      } else if (section == Section::kEntries && title != "Commands" && title != "Options") {
        out += ".SS " + Escape(title, false) + "\n";
      } else {
        out += ".SH " + Escape(Upper(title), false) + "\n", section = Section::kEntries;
      }
      continue;
    }
    const std::size_t indent = Indent(line);
    if (section == Section::kExamples) {
      fill();
      if (indent >= 4) {
        out += ".RS 4\n.nf\n" + Escape(Trim(line), true) + "\n.fi\n.RE\n";
      } else {
        out += ".PP\n" + Escape(Trim(line), false) + "\n";
      }
      continue;
    }
    if (section == Section::kEntries && indent == 2) {
      // "  --epochs arg (=10)    passes over ...": a term, 2+ spaces, its description.
      fill();
      const std::string rest = line.substr(2);
      const std::size_t gap = rest.find("  ");
      out += ".TP\n" + Term(Trim(rest.substr(0, gap))) + "\n";
      if (gap != std::string::npos) out += Escape(Trim(rest.substr(gap)), false) + "\n";
      entry_open = true;
      continue;
    }
    if (entry_open && indent >= 4) {  // an entry's description, continued
      out += Escape(Trim(line), false) + "\n";
      continue;
    }
    if (indent > 0) {  // an indented line of prose: a command or a list, kept as laid out
      if (!unfilled) out += ".nf\n", unfilled = true;
      out += Escape(line, true) + "\n";
      continue;
    }
    fill();
    if (section == Section::kSynopsis || section == Section::kStart) out += ".SH DESCRIPTION\n";
    if (section != Section::kEntries) section = Section::kProse;
    out += Escape(line, false) + "\n";
  }
  fill();
  out += ".SH SEE ALSO\nREADME.md and docs/ in the dtlab source tree; \\fBdtlab \\-\\-help\\fR lists the commands.\n";
  return out;
}

}  // namespace dtlab::cli
