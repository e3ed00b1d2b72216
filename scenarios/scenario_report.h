// The outputs of a scenario run (`dtlab run`): the verdict table as text, a JSON
// summary, a CSV of per-step metrics, TensorBoard event files, and a
// self-contained HTML report with plots. Every writer is deterministic apart from
// TensorBoard's wall times: the text and HTML are golden-tested.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scenarios/html_report.h"
#include "scenarios/scenario_runner.h"

namespace dtlab {

/// How `dtlab run` lays out its text.
struct ScenarioTextOptions {
  int width = 100;      // descriptions and details wrap here
  int table_width = 0;  // everything fits this many columns (a terminal's); 0: tables as wide as they need
  bool color = false;   // ANSI colour: PASS green, FAIL red, the pitfall (an expected failure) yellow
};

/// The verdict table as `dtlab run` prints it (wrapped at `width` columns, tables
/// as wide as they need: the layout of the golden files).
std::string FormatScenarioText(const ScenarioResult& result, int width = 100);
/// The same, fitted to a terminal (scenarios/text_table.h: short headers, columns
/// left out, wrapped cells, or one block per row).
std::string FormatScenarioText(const ScenarioResult& result, const ScenarioTextOptions& options);

/// How a verdict reads: as expected; the pitfall, as expected (a check its file
/// expects to fail fails: the pitfall the scenario shows); or not as expected.
report::VerdictLook VerdictLookOf(const CheckVerdict& verdict);
/// "as expected", "the pitfall, as expected" or "NOT AS EXPECTED".
std::string VerdictWords(const CheckVerdict& verdict);

/// One line per check: "as expected" or not, for summaries (the flagship).
std::string FormatVerdictCount(const ScenarioResult& result);

/// `text` (a headline or a description) with its {{value}} and {{run.value}}
/// placeholders filled in from the runs' named values (counts as whole numbers, other values %.3g); {{value}} reads
/// `default_run`. A placeholder naming no value is left as written. So a
/// description quotes the numbers of the run it describes, --set included.
std::string FormatRunText(const ScenarioResult& result, const std::string& text,
                          const std::string& default_run = "main");
/// The scenario's headline, filled in (FormatRunText).
std::string FormatHeadline(const ScenarioResult& result);

/// Runs, values, per-step metrics and verdicts.
nlohmann::json ScenarioToJson(const ScenarioResult& result);

/// One row per run and step: run,step,epoch,loss,mean_loss,accuracy,batch_sizes,
/// replica_losses,reference_passed,max_ulp,distributed_norm,reference_norm.
Status WriteStepCsv(const ScenarioResult& result, const std::string& path);

/// Scalars per step (train/loss, train/accuracy, reference/*) and per epoch
/// (epoch/*) under DIR/RUN/ (RUN: the run name), one event file per run.
Status WriteTensorBoard(const ScenarioResult& result, const std::string& directory);

/// The plots of a result: loss and accuracy per step, gradient norms against the
/// reference, per-replica batch sizes and losses, and a timeline of the main run's
/// first steps (compute and all-reduce, simulated).
std::vector<report::LinePlot> ScenarioLinePlots(const ScenarioResult& result);
std::vector<report::BarPlot> ScenarioBarPlots(const ScenarioResult& result);
report::TimelinePlot ScenarioTimeline(const ScenarioResult& result, int steps = 2);

/// The HTML report: the verdicts, the runs and every plot.
std::string RenderScenarioReport(const ScenarioResult& result);

}  // namespace dtlab
