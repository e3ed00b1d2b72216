// dtlab lesson: lists the lessons, or plays one in the terminal (predict, then
// reveal), or writes it as an HTML handout. The lesson's runs are scenarios.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/command.h"
#include "cli/progress_line.h"
#include "cli/run_flags.h"
#include "cli/terminal.h"
#include "core/file_io.h"
#include "core/text.h"
#include "lessons/handout_index.h"
#include "lessons/lesson_player.h"
#include "scenarios/catalog.h"
#include "scenarios/scenario_report.h"
#include "scenarios/text_table.h"

namespace dtlab::cli {
namespace {

namespace po = boost::program_options;

constexpr const char* kLessonExamples =
    "  List the lessons:\n"
    "    dtlab lesson\n"
    "  Play one, predicting each number before it is revealed:\n"
    "    dtlab lesson loss-scaling\n"
    "  Play it straight through on a projector and keep the handout:\n"
    "    dtlab lesson loss-scaling --no-interactive --html loss-scaling.html\n"
    "  Every lesson's handout and an index page, for a workshop's web page:\n"
    "    dtlab lesson --all --html handouts\n";

// Runs a lesson's run block as a scenario: its table, its named values (the main
// run's by name, a variant's as "variant.name") and its plots.
// The columns a handout's preformatted text fits before it wraps (scenarios/html_report.cc:
// an 820 px column at 12 px monospace).
constexpr int kHandoutColumns = 100;

// `text` lays out the table as the lesson's terminal needs it. `progress`: draw the
// run's progress under the "(running ...)" line (a terminal only).
StatusOr<LessonRunOutput> RunForLesson(const LessonRunRequest& request, const ScenarioTextOptions& text,
                                       bool progress = false) {
  std::string path;
  if (request.scenario.find('/') != std::string::npos || request.scenario.ends_with(".toml")) {
    path = (std::filesystem::path(request.lesson_dir) / request.scenario).string();
  } else {
    DTLAB_ASSIGN_OR_RETURN(path, ResolveScenarioPath(request.scenario));
  }
  DTLAB_ASSIGN_OR_RETURN(Scenario scenario, LoadScenario(path, request.sets));
  ProgressLine line(progress);  // cleared when it goes, before the run's table is printed
  ScenarioRunOptions options;
  options.observer = &line;
  DTLAB_ASSIGN_OR_RETURN(ScenarioResult result, RunScenario(scenario, options));
  line.Clear();
  if (!result.unexpected.ok()) return result.unexpected;
  LessonRunOutput out;
  out.text = FormatScenarioText(result, text);
  // A page is not a terminal: no colour, and tables fitted to the 100 columns of the
  // handout's preformatted block (docs/instructors.md), which wraps a wider line.
  out.handout_text = FormatScenarioText(result, ScenarioTextOptions{80, kHandoutColumns, false});
  for (const auto& run : result.runs)
    for (const auto& [name, value] : run.values)
      out.values.emplace_back(run.name == "main" ? name : run.name + "." + name, value);
  for (std::size_t i = 0; i < result.verdicts.size(); ++i) {
    const std::string prefix = "check" + std::to_string(i + 1) + ".";
    out.values.emplace_back(prefix + "passed", result.verdicts[i].passed ? 1.0 : 0.0);
    for (const auto& [name, value] : result.verdicts[i].numbers) out.values.emplace_back(prefix + name, value);
  }
  for (const auto& plot : ScenarioLinePlots(result)) out.svg_plots.push_back(report::RenderSvg(plot));
  for (const auto& plot : ScenarioBarPlots(result)) out.svg_plots.push_back(report::RenderSvg(plot));
  out.verdicts_as_expected = result.all_as_expected;
  return out;
}

// An output path that cannot be written is a usage error (exit 2), found before
// any lesson runs.
int RefuseOutput(const Status& status) {
  std::fprintf(stderr, "dtlab lesson: %s\n", EscapeControl(status.message()).c_str());
  return 2;
}

// dtlab lesson --all --html DIR: plays every lesson straight through (its text is
// not printed), writes DIR/NAME.html for each and DIR/index.html linking them.
int WriteAllHandouts(const std::string& lessons_dir, const std::string& directory) {
  namespace fs = std::filesystem;
  auto lessons = LoadLessonDirectory(lessons_dir);
  if (!lessons.ok()) return ReportError("lesson", lessons.status());
  std::error_code error;
  const fs::file_status status = fs::status(directory, error);
  if (fs::exists(status) && !fs::is_directory(status))
    return RefuseOutput(
        Status::InvalidArgument("--all writes into a directory, and --html " + directory + " is not one"));
  if (!fs::exists(status) && !fs::create_directory(directory, error))
    return RefuseOutput(
        Status::InvalidArgument("cannot create the directory " + directory + " for --html: " + error.message()));
  if (Status s = CheckOutputPath((fs::path(directory) / "index.html").string(), "--html"); !s.ok())
    return RefuseOutput(s);
  std::vector<HandoutEntry> entries;
  bool all_as_expected = true;
  for (const Lesson& lesson : *lessons) {
    std::ostringstream ignored;
    PlayOptions play;
    play.out = &ignored;
    // Handouts are files: the full, uncoloured tables (the default text options).
    auto report = PlayLesson(
        lesson, [](const LessonRunRequest& request) { return RunForLesson(request, ScenarioTextOptions{}); }, play);
    if (!report.ok()) return ReportError("lesson", report.status());
    const std::string file = lesson.name + ".html";
    if (Status s = WriteFileAtomically((fs::path(directory) / file).string(), RenderHandout(lesson, *report)); !s.ok())
      return ReportError("lesson", s);
    entries.push_back({file, lesson.title, lesson.summary, report->all_as_expected});
    all_as_expected = all_as_expected && report->all_as_expected;
    std::printf("wrote %s%s\n", (fs::path(directory) / file).c_str(),
                report->all_as_expected ? "" : " (a run did not behave as the lesson expects)");
    std::fflush(stdout);
  }
  const std::string index = (fs::path(directory) / "index.html").string();
  if (Status s = WriteFileAtomically(index, RenderHandoutIndex(entries)); !s.ok()) return ReportError("lesson", s);
  std::printf("wrote %s (links to %zu handouts)\n", index.c_str(), entries.size());
  return all_as_expected ? 0 : 1;
}

}  // namespace

int LessonCommand(const std::vector<std::string>& args) {
  std::string name, html, lessons_dir = LessonsDirectory(), color_flag;
  int width = 0;
  po::options_description options("Options");
  options.add_options()("lesson", po::value(&name), "the lesson to play (a name from the list, or a lesson file)")(
      "no-interactive", "play straight through without asking for predictions (projectors, tests)")(
      "html", po::value(&html),
      "also write the lesson as a self-contained HTML handout with its plots to this file; with --all, a directory")(
      "all", "with --html DIR: write every lesson's handout (DIR/NAME.html) and DIR/index.html linking them")(
      "lessons-dir", po::value(&lessons_dir)->default_value(lessons_dir), "where the lesson files are")(
      "width", po::value(&width)->default_value(0),
      "fit text and tables to this many columns (0: the terminal's, at most 80 for text; 80 when not on a "
      "terminal, with tables as wide as they need)");
  AddColorFlag(options, &color_flag);
  AddRunFlag(options, *FindRunOptionByFlag("threads"));  // as dtlab train's
  po::positional_options_description positional;
  positional.add("lesson", 1);
  po::variables_map values;
  const int parsed =
      ParseOptions("lesson", "[NAME] [options]",
                   "Without NAME, lists the lessons. With NAME, plays the lesson: its narrative, then each run with\n"
                   "its real numbers. On a terminal it first asks you to predict a number, then reveals it.\n"
                   "Lessons are Markdown files an instructor can edit (format: lessons/README.md).\n"
                   "For a workshop's web page, --all --html DIR writes every lesson's handout and an index.",
                   options, args, values, &positional, nullptr, kLessonExamples);
  if (parsed >= 0) return parsed;
  if (!ApplyThreadCount(values["threads"].as<int>())) return 2;
  const StatusOr<bool> color = ColorFromFlag(color_flag);
  if (!color.ok()) return ReportError("lesson", color.status());
  if (width < 0)
    return ReportError("lesson", Status::InvalidArgument("--width must be 0 or more, got " + std::to_string(width)));
  if (values.count("all")) {
    if (!name.empty() || html.empty()) {
      std::fputs("dtlab lesson: --all writes handouts: give --html DIR and no lesson name\n", stderr);
      return 2;
    }
    return WriteAllHandouts(lessons_dir, html);
  }
  if (!html.empty())
    if (Status s = CheckOutputPath(html, "--html"); !s.ok()) return RefuseOutput(s);
  if (name.empty()) {
    auto lessons = LoadLessonDirectory(lessons_dir);
    if (!lessons.ok()) return ReportError("lesson", lessons.status());
    std::printf("Lessons (dtlab lesson NAME):\n");
    const int fit = width > 0 ? width : FitWidth();  // on a terminal, summaries wrap
    for (const auto& l : *lessons) {
      const std::string name_column =
          "  " + l.name + std::string(l.name.size() < 28 ? 28 - l.name.size() : 0, ' ') + " ";
      std::fputs((HangText(name_column, l.title, fit) + HangText("      ", l.summary, fit)).c_str(), stdout);
    }
    return 0;
  }
  auto lesson = FindLesson(lessons_dir, name);
  if (!lesson.ok()) return ReportError("lesson", lesson.status());
  PlayOptions play;
  play.interactive = !values.count("no-interactive") && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  play.in = &std::cin;
  play.out = &std::cout;
  play.color = *color;
  // Text wraps at 80 columns, or fewer on a narrower terminal; tables fit the
  // terminal (or --width), and keep their full width in a file or a pipe.
  const int table_width = width > 0 ? width : FitWidth();
  play.width = width > 0 ? width : std::min(80, table_width > 0 ? table_width : 80);
  play.fit_width = table_width;
  const ScenarioTextOptions text{play.width, table_width, play.color};
  const bool progress = isatty(STDOUT_FILENO) && isatty(STDERR_FILENO);
  auto report = PlayLesson(
      *lesson, [&text, progress](const LessonRunRequest& request) { return RunForLesson(request, text, progress); },
      play);
  std::cout.flush();
  if (!report.ok()) return ReportError("lesson", report.status());
  if (!html.empty())
    if (Status s = WriteFileAtomically(html, RenderHandout(*lesson, *report)); !s.ok()) return ReportError("lesson", s);
  return report->all_as_expected ? 0 : 1;
}

}  // namespace dtlab::cli
