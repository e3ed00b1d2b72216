// dtlab run: runs a scenario file (or a built-in scenario by name) and prints its
// verdict table; dtlab list: the built-in scenarios and lessons.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <utility>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/graceful_stop.h"
#include "cli/progress_line.h"
#include "cli/run_flags.h"
#include "cli/terminal.h"
#include "core/file_io.h"
#include "core/text.h"
#include "lessons/lesson.h"
#include "scenarios/catalog.h"
#include "scenarios/scenario_report.h"
#include "scenarios/text_table.h"

namespace dtlab::cli {
namespace {

namespace po = boost::program_options;

int ExitCodeOf(const ScenarioResult& result) {
  if (!result.unexpected.ok()) return ExitCodeFor(result.unexpected);
  return result.all_as_expected ? 0 : 1;
}

// A scenario stopped by SIGINT or SIGTERM (cli/graceful_stop.h): what was done, on
// `out`; the exit code.
int ReportStop(const ScenarioResult& result, std::size_t runs, std::FILE* out) {
  const RunResult& last = result.runs.back();
  std::string completed;
  for (std::size_t i = 0; i + 1 < result.runs.size(); ++i)
    completed += (completed.empty() ? "" : ", ") + result.runs[i].name;
  std::fprintf(out,
               "stopped at step %lld of run '%s' (run %zu of %zu); completed: %s. The checks did not run; a "
               "scenario starts afresh, so rerun the same command to run it again.\n",
               static_cast<long long>(last.report.steps), EscapeControl(last.name).c_str(), result.runs.size(), runs,
               completed.empty() ? "none" : EscapeControl(completed).c_str());
  std::fflush(out);
  return ExitCodeForStop(result.stopped_by);
}

// The flagship's one-screen summary: each listed scenario run, one line each.
int RunSummary(const Scenario& scenario, std::FILE* out, bool progress, nlohmann::json* json,
               const std::atomic<int>* stop_request, int width = 0, bool color = false) {
  if (scenario.summary.empty()) return 0;
  std::fprintf(out, "\nThe classic pitfalls, each a built-in scenario (dtlab run NAME shows its table):\n");
  int worst = 0;
  for (const auto& name : scenario.summary) {
    auto path = ResolveScenarioPath(name);
    if (!path.ok()) return ReportError("run", path.status());
    auto pitfall = LoadScenario(*path);
    if (!pitfall.ok()) return ReportError("run", pitfall.status());
    ProgressLine line(progress);
    ScenarioRunOptions options;
    options.observer = &line;
    options.stop_request = stop_request;
    auto result = RunScenario(*pitfall, options);
    line.Clear();
    if (!result.ok()) return ReportError("run", result.status());
    if (result->stopped_by != 0) return ReportStop(*result, pitfall->runs.size(), out);
    const int code = ExitCodeOf(*result);
    worst = std::max(worst, code);
    const std::string headline = pitfall->headline.empty() ? pitfall->title : FormatHeadline(*result);
    const std::string verdict = code == 0 ? "as expected" : "NOT AS EXPECTED";
    const std::string padded_name = "  " + name + std::string(name.size() < 27 ? 27 - name.size() : 0, ' ') + " ";
    // On a narrow terminal the headline wraps under itself (the name and verdict take 47 columns).
    const std::string prefix = padded_name + Paint(verdict, code == 0 ? Tone::kPass : Tone::kFail, color) +
                               std::string(17 - verdict.size(), ' ');
    std::fputs(HangText(prefix, headline, width).c_str(), out);
    if (json)
      json->push_back({{"scenario", name},
                       {"title", pitfall->title},
                       {"headline", headline},
                       {"as_expected", code == 0},
                       {"verdicts", FormatVerdictCount(*result)}});
  }
  return worst;
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) {
  std::string file, report, csv, tensorboard, trace, color_flag;
  std::vector<std::string> sets;
  po::options_description options("Options");
  options.add_options()("scenario", po::value(&file),
                        "a scenario file (TOML) or the name of a built-in scenario (dtlab list)")(
      "set", po::value(&sets)->composing(),
      "override a key of the file, e.g. --set cluster.replicas=8 --set loss.denominator=global (repeatable)")(
      "json", "print a JSON summary on stdout instead of the table")(
      "report", po::value(&report), "write a self-contained HTML report with plots to this file")(
      "csv", po::value(&csv), "write the per-step metrics of every run as CSV to this file")(
      "tensorboard", po::value(&tensorboard),
      "write TensorBoard event files (one folder per run) under this directory")(
      "trace", po::value(&trace), "write a Chrome trace (Perfetto) of the main run's first steps");
  AddRunFlag(options, *FindRunOptionByFlag("threads"));  // as dtlab train's
  options.add_options()("no-progress", "never draw the progress line");
  AddColorFlag(options, &color_flag);
  po::positional_options_description positional;
  positional.add("scenario", 1);
  po::variables_map values;
  const int parsed =
      ParseOptions("run", "SCENARIO [options]",
                   "Runs a scenario: the runs it declares (a cluster, data, loss code, math mode), then its checks,\n"
                   "each against the verdict the file expects. Exit 0 when every verdict is as expected, 1 when one\n"
                   "is not, 2 for a bad file or option, 3 when a run faults unexpectedly, 130 (143) when Ctrl-C\n"
                   "(SIGTERM) stopped it after the current step of the run in progress. On a terminal (or with\n"
                   "COLUMNS set) the tables fit its width: narrower headers, columns left out, or one block per run.\n"
                   "Built-in scenarios: dtlab list. File format: docs/scenarios.md.",
                   options, args, values, &positional, nullptr,
                   "  The flagship: 4 replicas held against one device, then the classic pitfalls:\n"
                   "    dtlab run flagship\n"
                   "  The same scenario on 8 replicas, with an HTML report of its plots:\n"
                   "    dtlab run per-replica-mean --set cluster.replicas=8 --report report.html\n"
                   "  Your own scenario file, its per-step metrics as CSV:\n"
                   "    dtlab run my.toml --csv steps.csv\n");
  if (parsed >= 0) return parsed;
  if (file.empty()) {
    std::fputs("dtlab run: which scenario? Give a file or a built-in name (dtlab list shows them)\n", stderr);
    return 2;
  }
  if (!ApplyThreadCount(values["threads"].as<int>())) return 2;
  const StatusOr<bool> color = ColorFromFlag(color_flag);
  if (!color.ok()) return ReportError("run", color.status());
  auto path = ResolveScenarioPath(file);
  if (!path.ok()) return ReportError("run", path.status());
  auto scenario = LoadScenario(*path, sets);
  if (!scenario.ok()) return ReportError("run", scenario.status());

  // Output paths are checked before the runs, not discovered unwritable after them
  // (a device, a FIFO or a directory is refused: core/file_io.h).
  for (const auto& [output, option] : {std::pair{&report, "--report"}, {&csv, "--csv"}, {&trace, "--trace"}})
    if (!output->empty())
      if (Status s = CheckOutputPath(*output, option); !s.ok()) return ReportError("run", s);

  const bool json = values.count("json") > 0;
  const bool progress = !values.count("no-progress") && isatty(STDERR_FILENO);
  ProgressLine line(progress);
  ScenarioRunOptions run_options;
  run_options.observer = &line;
  run_options.trace_path = trace;
  run_options.stop_request = InstallGracefulStop(isatty(STDERR_FILENO));
  auto result = RunScenario(*scenario, run_options);
  line.Clear();
  if (!result.ok()) return ReportError("run", result.status());
  if (result->stopped_by != 0) return ReportStop(*result, scenario->runs.size(), json ? stderr : stdout);

  if (!report.empty())
    if (Status s = WriteFileAtomically(report, RenderScenarioReport(*result)); !s.ok()) return ReportError("run", s);
  if (!csv.empty())
    if (Status s = WriteStepCsv(*result, csv); !s.ok()) return ReportError("run", s);
  if (!tensorboard.empty())
    if (Status s = WriteTensorBoard(*result, tensorboard); !s.ok()) return ReportError("run", s);

  int code = ExitCodeOf(*result);
  if (json) {
    nlohmann::json out = ScenarioToJson(*result);
    if (!scenario->summary.empty()) {
      out["summary"] = nlohmann::json::array();
      code = std::max(code, RunSummary(*scenario, stderr, progress, &out["summary"], run_options.stop_request));
    }
    PrintJson(out);
  } else {
    const int width = FitWidth();
    std::fputs(FormatScenarioText(*result, ScenarioTextOptions{100, width, *color}).c_str(), stdout);
    std::fflush(stdout);
    code = std::max(code, RunSummary(*scenario, stdout, progress, nullptr, run_options.stop_request, width, *color));
  }
  if (!result->unexpected.ok()) ReportError("run", result->unexpected);
  return code;
}

int ListCommand(const std::vector<std::string>& args) {
  po::options_description options("Options");
  options.add_options()("json", "print the list as JSON");
  po::variables_map values;
  const int parsed = ParseOptions("list", "[options]",
                                  "Lists the built-in scenarios (dtlab run NAME) and lessons (dtlab lesson NAME).\n"
                                  "Scenarios are read from " +
                                      ScenariosDirectory() + ", lessons from " + LessonsDirectory() + ".",
                                  options, args, values, nullptr, nullptr,
                                  "  What there is to run and play:\n"
                                  "    dtlab list\n");
  if (parsed >= 0) return parsed;
  const auto scenarios = ListBuiltinScenarios();
  auto lessons = LoadLessonDirectory(LessonsDirectory());
  if (!lessons.ok()) return ReportError("list", lessons.status());
  int code = 0;
  if (values.count("json")) {
    nlohmann::json out = {{"scenarios", nlohmann::json::array()}, {"lessons", nlohmann::json::array()}};
    for (const auto& s : scenarios) {
      nlohmann::json entry = {{"name", s.name}, {"title", s.title}, {"description", s.description}, {"path", s.path}};
      if (!s.error.empty()) entry["error"] = s.error, code = 2;
      out["scenarios"].push_back(entry);
    }
    for (const auto& l : *lessons)
      out["lessons"].push_back({{"name", l.name}, {"title", l.title}, {"summary", l.summary}, {"path", l.path}});
    PrintJson(out);
    return code;
  }
  // On a terminal a long title wraps beside its name.
  const int width = FitWidth();
  const auto name_column = [](const std::string& name) {
    return "  " + name + std::string(name.size() < 28 ? 28 - name.size() : 0, ' ') + " ";
  };
  std::printf("Scenarios (dtlab run NAME):\n");
  for (const auto& s : scenarios) {
    if (!s.error.empty()) {
      std::fputs(HangText(name_column(s.name), "(does not load: " + s.error + ")", width).c_str(), stdout);
      code = 2;
      continue;
    }
    std::fputs(HangText(name_column(s.name), s.title, width).c_str(), stdout);
  }
  std::printf("\nLessons (dtlab lesson NAME):\n");
  for (const auto& l : *lessons) std::fputs(HangText(name_column(l.name), l.title, width).c_str(), stdout);
  return code;
}

}  // namespace dtlab::cli
