#include "lessons/lesson_player.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <istream>
#include <ostream>
#include <string_view>
#include <utility>

#include "core/text.h"
#include "lessons/lesson_values.h"
#include "scenarios/html_report.h"
#include "scenarios/text_table.h"

namespace dtlab {

namespace {

using Values = std::vector<std::pair<std::string, double>>;

constexpr const char* kBold = "\033[1m";
constexpr const char* kDim = "\033[2m";
constexpr const char* kRed = "\033[31m";
constexpr const char* kGreen = "\033[32m";
constexpr const char* kYellow = "\033[33m";
constexpr const char* kReset = "\033[0m";

Status Error(const std::string& path, int line, const std::string& what) {
  return Status::InvalidArgument(path + ":" + std::to_string(line) + ": " + what);
}

std::string Format(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

// Numbers in narrative, answers and predictions: 4 significant digits ("4", "0.05");
// a whole number below a million in full (a loss scale of 16384, not 1.638e+04).
std::string Number(double value) {
  if (std::abs(value) < 1e6 && value == std::trunc(value)) return Format("%.0f", value);
  return Format("%.4g", value);
}

std::string WithUnit(double value, const std::string& unit) {
  return Number(value) + (unit.empty() ? "" : (unit == "%" ? "" : " ") + unit);
}

std::string NameList(const Values& values) {
  if (values.empty()) return "it reports no values";
  std::string names;
  for (const auto& [name, value] : values) names += (names.empty() ? "" : ", ") + name;
  return "its values are " + names;
}

const double* FindValue(const Values& values, const std::string& name) {
  for (const auto& [key, value] : values)
    if (key == name) return &value;
  return nullptr;
}

// ---- narrative: a small Markdown subset ------------------------------------

struct MdBlock {
  enum class Kind { kHeading, kParagraph, kItem, kQuote, kCode, kTable, kRule } kind = Kind::kParagraph;
  int level = 0;                   // heading level; list item indentation
  std::string marker;              // list item marker: "-", "1." ...
  std::string text;                // heading, paragraph, item, quote: lines joined by spaces
  std::vector<std::string> lines;  // code and table lines as written
};

MdBlock Md(MdBlock::Kind kind, int level = 0, std::string marker = "", std::string text = "") {
  MdBlock block;
  block.kind = kind;
  block.level = level;
  block.marker = std::move(marker);
  block.text = std::move(text);
  return block;
}

bool IsFenceLine(std::string_view line) { return Trim(line).starts_with("```"); }

bool IsRule(std::string_view line) {
  line = Trim(line);
  return line.size() >= 3 && (line.find_first_not_of('-') == std::string_view::npos ||
                              line.find_first_not_of('*') == std::string_view::npos ||
                              line.find_first_not_of('_') == std::string_view::npos);
}

// A list item ("- x", "* x", "+ x", "3. x", "3) x"): stores indentation, marker and text.
bool ParseItem(std::string_view line, int* indent, std::string* marker, std::string* text) {
  const std::size_t start = line.find_first_not_of(' ');
  if (start == std::string_view::npos) return false;
  std::string_view rest = line.substr(start);
  std::size_t n = 0;
  if (rest.size() >= 2 && (rest[0] == '-' || rest[0] == '*' || rest[0] == '+') && rest[1] == ' ') {
    n = 1;
  } else {
    while (n < rest.size() && n < 9 && rest[n] >= '0' && rest[n] <= '9') ++n;
    if (n == 0 || n + 1 >= rest.size() || (rest[n] != '.' && rest[n] != ')') || rest[n + 1] != ' ') return false;
    ++n;
  }
  *indent = static_cast<int>(start);
  *marker = std::string(rest.substr(0, n));
  *text = std::string(Trim(rest.substr(n + 1)));
  return true;
}

// Replaces {{name}} by the named value of `values` (nullptr: no run yet). Inside code
// fences nothing is replaced. Strict: an unknown name is an error; lenient (the
// handout, which cannot fail): it stays as written.
StatusOr<std::string> Interpolate(const std::string& line, int line_number, const std::string& path,
                                  const Values* values, const std::string& run_name, bool strict) {
  std::string out;
  std::size_t i = 0;
  for (;;) {
    const std::size_t open = line.find("{{", i);
    const std::size_t close = open == std::string::npos ? open : line.find("}}", open + 2);
    if (close == std::string::npos) break;
    const std::string name(Trim(std::string_view(line).substr(open + 2, close - open - 2)));
    const double* value = values == nullptr ? nullptr : FindValue(*values, name);
    out += line.substr(i, open - i);
    if (value != nullptr) {
      out += Number(*value);
    } else if (strict && values == nullptr) {
      return Error(path, line_number,
                   "{{" + name +
                       "}} names a value of the latest run, but no ```run block comes "
                       "before this line");
    } else if (strict) {
      return Error(
          path, line_number,
          "{{" + name + "}} is not a value of the latest run (scenario '" + run_name + "'); " + NameList(*values));
    } else {
      out += line.substr(open, close + 2 - open);
    }
    i = close + 2;
  }
  return out + line.substr(i);
}

StatusOr<std::vector<MdBlock>> ParseMarkdown(const LessonNarrative& narrative, const std::string& path,
                                             const Values* values, const std::string& run_name, bool strict) {
  std::vector<MdBlock> blocks;
  std::vector<std::string> lines;
  for (std::size_t begin = 0; begin <= narrative.text.size();) {
    std::size_t end = narrative.text.find('\n', begin);
    if (end == std::string::npos) end = narrative.text.size();
    lines.push_back(narrative.text.substr(begin, end - begin));
    begin = end + 1;
  }
  bool open_text = false;  // whether the last block takes continuation lines
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (IsFenceLine(lines[i])) {
      MdBlock code = Md(MdBlock::Kind::kCode);
      // Lesson parsing guarantees a closing fence of at least as many backticks.
      const std::size_t ticks = Trim(lines[i]).find_first_not_of('`');
      for (++i; i < lines.size(); ++i) {
        const std::string_view t = Trim(lines[i]);
        if (t.find_first_not_of('`') == std::string_view::npos && t.size() >= ticks) break;
        code.lines.push_back(lines[i]);
      }
      blocks.push_back(std::move(code));
      open_text = false;
      continue;
    }
    DTLAB_ASSIGN_OR_RETURN(const std::string line,
                           Interpolate(lines[i], narrative.line + static_cast<int>(i), path, values, run_name, strict));
    const std::string_view trimmed = Trim(line);
    int indent = 0;
    std::string marker, text;
    if (trimmed.empty()) {
      open_text = false;
    } else if (trimmed.starts_with('#') && trimmed.find_first_not_of('#') <= 6 &&
               trimmed.find_first_not_of('#') < trimmed.size() && trimmed[trimmed.find_first_not_of('#')] == ' ') {
      const std::size_t level = trimmed.find_first_not_of('#');
      const std::string heading(Trim(trimmed.substr(level)));
      blocks.push_back(Md(MdBlock::Kind::kHeading, static_cast<int>(level), "", heading));
      open_text = false;
    } else if (IsRule(trimmed)) {
      blocks.push_back(Md(MdBlock::Kind::kRule));
      open_text = false;
    } else if (trimmed.starts_with('|')) {
      if (blocks.empty() || blocks.back().kind != MdBlock::Kind::kTable || open_text) {
        blocks.push_back(Md(MdBlock::Kind::kTable));
      }
      blocks.back().lines.push_back(std::string(trimmed));
      open_text = false;
    } else if (ParseItem(line, &indent, &marker, &text)) {
      blocks.push_back(Md(MdBlock::Kind::kItem, indent, marker, text));
      open_text = true;
    } else if (trimmed.starts_with('>')) {
      const std::string quoted(Trim(trimmed.substr(1)));
      if (open_text && blocks.back().kind == MdBlock::Kind::kQuote) {
        blocks.back().text += " " + quoted;
      } else {
        blocks.push_back(Md(MdBlock::Kind::kQuote, 0, "", quoted));
      }
      open_text = true;
    } else if (open_text) {
      blocks.back().text += " " + std::string(trimmed);  // a continuation line
    } else {
      blocks.push_back(Md(MdBlock::Kind::kParagraph, 0, "", std::string(trimmed)));
      open_text = true;
    }
  }
  return blocks;
}

// Inline Markdown for the terminal: **bold** (ANSI bold, or just the text without
// colour) and [text](url) as "text (url)"; `code` stays as written.
std::string InlineText(const std::string& text, bool color) {
  std::string out;
  bool bold = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "**") == 0) {
      if (color) out += bold ? kReset : kBold;
      bold = !bold;
      ++i;
      continue;
    }
    if (text[i] == '[') {
      const std::size_t mid = text.find("](", i);
      const std::size_t end = mid == std::string::npos ? mid : text.find(')', mid);
      if (end != std::string::npos && text.find('\n', i) > end) {
        out += text.substr(i + 1, mid - i - 1) + " (" + text.substr(mid + 2, end - mid - 2) + ")";
        i = end;
        continue;
      }
    }
    out += text[i];
  }
  if (bold && color) out += kReset;
  return out;
}

// Word-wraps `text` to `width` columns; the first line starts with `first`, the rest with `rest`.
std::string Wrap(const std::string& text, int width, const std::string& first, const std::string& rest) {
  std::string out = first, word;
  std::size_t column = VisibleWidth(first);
  bool line_empty = true;
  const auto put = [&] {
    if (word.empty()) return;
    const std::size_t w = VisibleWidth(word);
    if (!line_empty && column + 1 + w > static_cast<std::size_t>(width)) {
      out += "\n" + rest;
      column = VisibleWidth(rest);
      line_empty = true;
    }
    if (!line_empty) {
      out += ' ';
      ++column;
    }
    out += word;
    column += w;
    line_empty = false;
    word.clear();
  };
  for (char c : text) {
    if (c == ' ' || c == '\t') {
      put();
    } else {
      word += c;
    }
  }
  put();
  return out + "\n";
}

// Prints sections separated by one blank line (list items are not separated).
class Printer {
 public:
  Printer(std::ostream& out, const PlayOptions& options) : out_(out), options_(options) {}

  void Section(bool separate = true) {
    if (printed_ && separate) out_ << '\n';
    printed_ = true;
  }
  std::string Style(const std::string& text, const char* style) const {
    return options_.color ? std::string(style) + text + kReset : text;
  }
  std::ostream& out() { return out_; }
  int width() const { return std::max(20, options_.width); }

  void Markdown(const std::vector<MdBlock>& blocks) {
    MdBlock::Kind previous = MdBlock::Kind::kRule;
    for (const MdBlock& block : blocks) {
      const bool in_list = block.kind == MdBlock::Kind::kItem && previous == MdBlock::Kind::kItem;
      previous = block.kind;
      Section(!in_list);
      switch (block.kind) {
        case MdBlock::Kind::kHeading: {
          const std::string text = InlineText(block.text, options_.color);
          out_ << Style(text, kBold) << '\n';
          if (block.level <= 2) out_ << std::string(VisibleWidth(text), block.level == 1 ? '=' : '-') << '\n';
          break;
        }
        case MdBlock::Kind::kParagraph:
          out_ << Wrap(InlineText(block.text, options_.color), width(), "", "");
          break;
        case MdBlock::Kind::kItem: {
          const std::string indent(static_cast<std::size_t>(block.level), ' ');
          out_ << Wrap(InlineText(block.text, options_.color), width(), indent + block.marker + " ",
                       indent + std::string(block.marker.size() + 1, ' '));
          break;
        }
        case MdBlock::Kind::kQuote:
          out_ << Wrap(InlineText(block.text, options_.color), width(), "> ", "> ");
          break;
        case MdBlock::Kind::kCode:  // on a narrow terminal a long line wraps at a space, never in a word
          for (const std::string& line : block.lines)
            out_ << WrapLines(line.empty() ? "\n" : "    " + line + "\n", options_.fit_width, 4);
          break;
        case MdBlock::Kind::kTable:
          for (const std::string& line : block.lines) out_ << WrapLines(line + "\n", options_.fit_width, 2);
          break;
        case MdBlock::Kind::kRule:
          out_ << std::string(static_cast<std::size_t>(std::min(width(), 40)), '-') << '\n';
          break;
      }
    }
  }

 private:
  std::ostream& out_;
  const PlayOptions& options_;
  bool printed_ = false;
};

// ---- questions -------------------------------------------------------------

// A prediction typed by the learner: a number, optionally followed by the unit.
std::optional<double> ParsePrediction(std::string_view text, const std::string& unit) {
  text = Trim(text);
  if (!unit.empty() && text.ends_with(unit)) text = Trim(text.substr(0, text.size() - unit.size()));
  if (text.empty()) return std::nullopt;
  const std::string copy(text);
  char* end = nullptr;
  const double value = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

// Reads one prediction: empty line or end of input skips; anything that is not a
// number is asked again once, with a hint.
std::optional<double> ReadPrediction(Printer& printer, std::istream& in, const std::string& unit) {
  std::ostream& out = printer.out();
  for (int attempt = 0; attempt < 2; ++attempt) {
    out << printer.Style("Your prediction: ", kBold) << std::flush;
    std::string line;
    if (!std::getline(in, line)) {
      out << '\n';  // end of input (Ctrl-D) echoes no newline
      return std::nullopt;
    }
    if (Trim(line).empty()) return std::nullopt;
    if (const std::optional<double> value = ParsePrediction(line, unit)) return value;
    if (attempt == 0) {
      out << "Please type a number such as 3.5" << (unit.empty() ? "" : " (the unit " + unit + " is optional)")
          << ", or press Enter to skip.\n";
    }
  }
  out << "(skipped)\n";
  return std::nullopt;
}

// "4 x — you said 3.5 (12.5% off)" and, for the terminal, the closeness verdict.
std::string AnswerText(const LessonQuestion& question, const PlayedAnswer& answer) {
  std::string text = WithUnit(answer.value, question.unit);
  if (!answer.prediction) return text;
  const double guess = *answer.prediction;
  text += " \xE2\x80\x94 you said " + Number(guess);
  if (answer.value != 0) {
    const double percent = 100 * std::fabs(guess - answer.value) / std::fabs(answer.value);
    text += " (" + Format(percent < 1000 ? "%.3g" : "%.0f", percent) + "% off)";
  } else {
    text += " (off by " + Number(std::fabs(guess)) + ")";
  }
  return text;
}

bool IsClose(double guess, double value, double tolerance) {
  // A hair of slack, so that a typed "4.04" is within 1% of 4 despite rounding.
  const double slack = 1e-12;
  if (value == 0) return std::fabs(guess) <= tolerance + slack;
  return std::fabs(guess - value) <= (tolerance + slack) * std::fabs(value);
}

std::string RunLabel(const LessonRun& run) {
  std::string label = run.scenario;
  for (std::size_t i = 0; i < run.sets.size(); ++i) label += (i == 0 ? " with " : ", ") + run.sets[i];
  return label;
}

bool Shows(const LessonRun& run, std::string_view item) {
  return std::find(run.show.begin(), run.show.end(), item) != run.show.end();
}

// What a run block's "values" display shows: the values its questions and the
// narrative after it are about (lessons/lesson_values.h), or all with "all values".
Values ShownValues(const Lesson& lesson, std::size_t block, const LessonRun& run, const Values& values) {
  if (Shows(run, "all values")) return values;
  return Shows(run, "values") ? ValuesAbout(lesson, block, values) : Values{};
}

void PrintRunOutput(Printer& printer, const LessonRun& run, const LessonRunOutput& output, const Values& shown) {
  if (Shows(run, "table") && !output.text.empty()) {
    printer.Section();
    printer.out() << output.text << (output.text.back() == '\n' ? "" : "\n");
  }
  if (!shown.empty()) {
    printer.Section();
    printer.out() << "Values:\n";
    std::size_t width = 0;
    for (const auto& [name, value] : shown) width = std::max(width, name.size());
    for (const auto& [name, value] : shown) {
      printer.out() << "  " << name << std::string(width - name.size() + 2, ' ') << Format("%.6g", value) << '\n';
    }
  }
  if (!output.verdicts_as_expected) {
    printer.Section();
    printer.out() << printer.Style("Note: this run's verdicts were not what the scenario expects.", kRed) << '\n';
  }
}

}  // namespace

StatusOr<PlayReport> PlayLesson(const Lesson& lesson, const LessonRunner& run, const PlayOptions& options) {
  if (options.out == nullptr) return Status::InvalidArgument("PlayLesson needs an output stream");
  if (options.interactive && options.in == nullptr) {
    return Status::InvalidArgument("PlayLesson needs an input stream when interactive");
  }
  Printer printer(*options.out, options);
  std::ostream& out = *options.out;
  PlayReport report;
  std::string lesson_dir = std::filesystem::path(lesson.path).parent_path().string();
  if (lesson_dir.empty()) lesson_dir = ".";

  printer.Section();
  out << printer.Style(lesson.title, kBold) << '\n' << std::string(VisibleWidth(lesson.title), '=') << '\n';
  out << Wrap(lesson.summary, printer.width(), "", "");

  for (std::size_t k = 0; k < lesson.blocks.size(); ++k) {
    if (const auto* narrative = std::get_if<LessonNarrative>(&lesson.blocks[k])) {
      const Values* latest = report.runs.empty() ? nullptr : &report.runs.back().output.values;
      const std::string run_name = report.runs.empty() ? "" : report.runs.back().request.scenario;
      DTLAB_ASSIGN_OR_RETURN(const std::vector<MdBlock> blocks,
                             ParseMarkdown(*narrative, lesson.path, latest, run_name, true));
      printer.Markdown(blocks);
      continue;
    }
    // Questions, then the run that answers them (ParseLesson guarantees the run).
    std::vector<const LessonQuestion*> questions;
    while (k < lesson.blocks.size() && std::holds_alternative<LessonQuestion>(lesson.blocks[k])) {
      questions.push_back(&std::get<LessonQuestion>(lesson.blocks[k++]));
    }
    if (k == lesson.blocks.size() || !std::holds_alternative<LessonRun>(lesson.blocks[k])) {
      return Error(lesson.path, questions.front()->line, "this question is not followed by a run block");
    }
    const LessonRun& run_block = std::get<LessonRun>(lesson.blocks[k]);
    PlayedRun played;
    played.block = k;
    played.line = run_block.line;
    played.request = {run_block.scenario, run_block.sets, lesson_dir};

    printer.Section();
    out << printer.Style("(running " + RunLabel(run_block) + " ...)", kDim) << '\n' << std::flush;
    StatusOr<LessonRunOutput> output = run(played.request);
    if (!output.ok()) {
      return output.status().WithContext(lesson.path + ":" + std::to_string(run_block.line) + ": scenario '" +
                                         run_block.scenario + "'");
    }
    played.output = std::move(output).value();
    for (const LessonQuestion* question : questions) {
      const double* value = FindValue(played.output.values, question->answer);
      if (value == nullptr) {
        return Error(lesson.path, question->answer_line,
                     "answer '" + question->answer + "' is not a value of scenario '" + run_block.scenario +
                         "' (run at line " + std::to_string(run_block.line) + "); " + NameList(played.output.values));
      }
      played.answers.push_back({question->answer, *value, std::nullopt, false});
    }

    for (std::size_t q = 0; q < questions.size(); ++q) {
      printer.Section();
      out << Wrap(printer.Style("Question:", kYellow) + " " + questions[q]->ask, printer.width(), "", "          ");
      if (options.interactive) {
        PlayedAnswer& answer = played.answers[q];
        answer.prediction = ReadPrediction(printer, *options.in, questions[q]->unit);
        answer.close = answer.prediction && IsClose(*answer.prediction, answer.value, questions[q]->tolerance);
      }
    }
    PrintRunOutput(printer, run_block, played.output, ShownValues(lesson, k, run_block, played.output.values));
    for (std::size_t q = 0; q < questions.size(); ++q) {
      const PlayedAnswer& answer = played.answers[q];
      printer.Section(q == 0);
      out << printer.Style("Answer:", kBold) << ' ' << AnswerText(*questions[q], answer);
      if (answer.prediction) {
        out << (answer.close ? " \xE2\x80\x94 " + printer.Style("close!", kGreen)
                             : " \xE2\x80\x94 not within " + Format("%.3g", 100 * questions[q]->tolerance) + "%");
      }
      out << '\n';
      ++report.questions;
      if (answer.close) ++report.predictions_close;
    }
    report.all_as_expected = report.all_as_expected && played.output.verdicts_as_expected;
    report.runs.push_back(std::move(played));
  }
  if (options.interactive && report.questions > 0) {
    printer.Section();
    out << "You were close on " << report.predictions_close << " of " << report.questions << " prediction"
        << (report.questions == 1 ? "" : "s") << ".\n";
  }
  out << std::flush;
  return report;
}

namespace {

// Inline Markdown for HTML paragraphs: **bold** markers dropped, links as "text (url)".
std::string PlainInline(const std::string& text) { return InlineText(text, false); }

}  // namespace

std::string RenderHandout(const Lesson& lesson, const PlayReport& played) {
  report::HtmlDocument doc(lesson.title);
  doc.AddHeading(1, lesson.title);
  doc.AddParagraph(lesson.summary);
  const PlayedRun* latest = nullptr;
  std::vector<const LessonQuestion*> questions;
  for (std::size_t k = 0; k < lesson.blocks.size(); ++k) {
    const LessonBlock& block = lesson.blocks[k];
    if (const auto* narrative = std::get_if<LessonNarrative>(&block)) {
      StatusOr<std::vector<MdBlock>> parsed =
          ParseMarkdown(*narrative, lesson.path, latest == nullptr ? nullptr : &latest->output.values, "", false);
      if (!parsed.ok()) continue;  // lenient interpolation cannot fail
      for (std::size_t b = 0; b < parsed->size(); ++b) {
        const MdBlock& md = (*parsed)[b];
        switch (md.kind) {
          case MdBlock::Kind::kHeading:
            doc.AddHeading(std::min(4, md.level + 1), PlainInline(md.text));
            break;
          case MdBlock::Kind::kParagraph:
            doc.AddParagraph(PlainInline(md.text));
            break;
          case MdBlock::Kind::kQuote:
            doc.AddParagraph(PlainInline(md.text));
            break;
          case MdBlock::Kind::kItem:
            doc.AddParagraph(std::string(static_cast<std::size_t>(md.level), ' ') + "\xE2\x80\xA2 " +
                             PlainInline(md.text));
            break;
          case MdBlock::Kind::kCode:
          case MdBlock::Kind::kTable: {
            std::string text;
            for (const std::string& line : md.lines) text += line + "\n";
            doc.AddPreformatted(text);
            break;
          }
          case MdBlock::Kind::kRule:
            break;
        }
      }
    } else if (const auto* question = std::get_if<LessonQuestion>(&block)) {
      questions.push_back(question);
      doc.AddHeading(3, "Question");
      doc.AddParagraph(question->ask);
    } else {
      const auto& run = std::get<LessonRun>(block);
      const auto it =
          std::find_if(played.runs.begin(), played.runs.end(), [&](const PlayedRun& r) { return r.block == k; });
      if (it == played.runs.end()) {
        questions.clear();
        continue;  // not played (a report from another lesson): nothing to show
      }
      latest = &*it;
      doc.AddHeading(4, "Run: " + RunLabel(run));
      const std::string& text = it->output.handout_text.empty() ? it->output.text : it->output.handout_text;
      if (!text.empty()) doc.AddPreformatted(StripAnsi(text));
      if (const Values shown = ShownValues(lesson, k, run, it->output.values); !shown.empty()) {
        std::vector<std::vector<std::string>> rows;
        for (const auto& [name, value] : shown) rows.push_back({name, Format("%.6g", value)});
        doc.AddTable({"value", "number"}, rows, {false, true});
      }
      for (const std::string& svg : it->output.svg_plots) doc.AddSvg(svg);
      if (!it->output.verdicts_as_expected) {
        doc.AddVerdict("UNEXPECTED", false, "this run's verdicts were not what the scenario expects");
      }
      for (std::size_t q = 0; q < questions.size() && q < it->answers.size(); ++q) {
        doc.AddParagraph("Answer: " + AnswerText(*questions[q], it->answers[q]));
      }
      questions.clear();
    }
  }
  return doc.Render();
}

}  // namespace dtlab
