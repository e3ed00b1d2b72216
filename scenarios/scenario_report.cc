#include "scenarios/scenario_report.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/file_io.h"
#include "core/text.h"
#include "scenarios/text_table.h"
#include "scenarios/tensorboard_writer.h"
#include "sim/engines/strategy.h"
#include "sim/training/memory_estimate.h"

namespace dtlab {
namespace {

std::string Format(const char* format, double v) {
  char text[64];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

// Wraps `text` at `width` columns, every line starting with `indent`.
std::string Wrap(const std::string& text, int width, const std::string& indent) {
  std::string out;
  for (const std::string& line : WrapWords(text, width - static_cast<int>(indent.size())))
    if (!line.empty()) out += indent + line + "\n";
  return out;
}

// How the global batch is split: the rebatch rule in force, "function" for
// distribute_datasets_from_function, "-" with one replica (no split).
std::string Split(const TrainConfig& c) {
  if (c.cluster.replicas == 1) return "-";
  if (c.input == InputApi::kFromFunction || c.cluster.strategy == StrategyKind::kParameterServer) return "function";
  return std::string(RebatchRuleName(EffectiveRebatchRule(c.rebatch, c.shard_policy)));
}

// The strategy, the replicas and how their gradients were summed: the all-reduce,
// or "folded" (docs/cluster.md) when the run folded them.
std::string Cluster(const RunResult& r) {
  const TrainConfig& c = r.run->config;
  std::string text = std::string(StrategyName(c.cluster.strategy)) + " " + std::to_string(c.cluster.replicas);
  if (c.cluster.workers > 1) text += " (" + std::to_string(c.cluster.workers) + " workers)";
  if (c.cluster.replicas > 1 && c.cluster.strategy != StrategyKind::kParameterServer)
    text += " " + (r.report.folded_reduction ? std::string("folded")
                                             : std::string(AllReduceAlgorithmName(c.cluster.all_reduce)));
  return text;
}

std::string ReferenceColumn(const RunResult& r) {
  if (r.refused()) return "REFUSED";
  if (r.faulted()) return "FAULT at step " + std::to_string(r.steps.size() + 1);
  if (!r.report.reference_check) return "-";
  const ReferenceCheckSummary& c = *r.report.reference_check;
  if (c.within_bound) return std::string(c.exact ? "PASS (bitwise)" : "PASS");
  return "FAIL " + std::to_string(c.steps_failed) + "/" + std::to_string(c.steps_checked) + " steps";
}

// A run's reference column in the pitfall's colour when a check expects it to fail.
Tone ReferenceTone(const ScenarioResult& result, const RunResult& r) {
  if (!r.report.reference_check || !r.status.ok()) return r.status.ok() ? Tone::kPlain : Tone::kFail;
  if (r.report.reference_check->within_bound) return Tone::kPass;
  for (const auto& v : result.verdicts)
    if (v.check && v.check->kind == ScenarioCheckKind::kReference && v.check->runs.front() == r.name &&
        !v.check->expect_pass)
      return Tone::kPitfall;
  return Tone::kFail;
}

// The global batch column: "64", or with gradient accumulation "4x16" (K
// micro-batches of the global batch per optimizer step).
std::string GlobalBatchText(const TrainConfig& c) {
  const std::string batch = std::to_string(c.global_batch_size());
  return c.cluster.accumulation.on() ? std::to_string(c.cluster.accumulation.steps) + "x" + batch : batch;
}

// The Runs table. On a narrow terminal the split, the step count, the math mode,
// the test accuracy and the global batch go first, in that order (FitTable).
TextTable RunTable(const ScenarioResult& result) {
  TextTable table;
  table.columns = {{"run", "", 0, false},     {"cluster", "", 0, true},         {"global batch", "batch", 5, false},
                   {"split", "", 1, false},   {"loss code", "", 0, true},       {"math", "", 3, false},
                   {"steps", "", 2, false},   {"final loss", "loss", 0, false}, {"test acc", "acc", 4, false},
                   {"reference", "", 0, true}};
  for (const auto& r : result.runs) {
    const TrainConfig& c = r.run->config;
    const bool ok = r.status.ok();
    table.rows.push_back({r.name, Cluster(r), GlobalBatchText(c), Split(c), c.cluster.loss().ShortName(),
                          std::string(MathModeName(c.cluster.math)), ok ? std::to_string(r.report.steps) : "-",
                          ok ? Format("%.4f", r.Value("final_loss")) : "-",
                          ok ? Format("%.2f%%", 100 * r.report.final_test_accuracy) : "-", ReferenceColumn(r)});
    std::vector<Tone> tones(table.columns.size(), Tone::kPlain);
    tones.back() = ReferenceTone(result, r);
    table.tones.push_back(std::move(tones));
  }
  return table;
}

Tone VerdictTone(const CheckVerdict& v) {
  switch (VerdictLookOf(v)) {
    case report::VerdictLook::kAsExpected:
      return Tone::kPass;
    case report::VerdictLook::kPitfall:
      return Tone::kPitfall;
    case report::VerdictLook::kNotAsExpected:
      break;
  }
  return Tone::kFail;
}

// The Checks table; on a narrow terminal "expected" goes first (the verdict says
// whether the outcome was the expected one), then the labels wrap.
TextTable CheckTable(const ScenarioResult& result) {
  TextTable table;
  table.columns = {{"#", "", 0, false},
                   {"check", "", 0, true},
                   {"expected", "", 1, false},
                   {"got", "", 0, false},
                   {"verdict", "", 0, true}};
  for (std::size_t i = 0; i < result.verdicts.size(); ++i) {
    const CheckVerdict& v = result.verdicts[i];
    table.rows.push_back({std::to_string(i + 1), v.label, v.expected, v.got, VerdictWords(v)});
    const Tone got = v.passed ? Tone::kPass : (v.as_expected ? Tone::kPitfall : Tone::kFail);
    table.tones.push_back({Tone::kPlain, Tone::kPlain, Tone::kPlain, got, VerdictTone(v)});
  }
  return table;
}

}  // namespace

report::VerdictLook VerdictLookOf(const CheckVerdict& v) {
  if (!v.as_expected) return report::VerdictLook::kNotAsExpected;
  // A check that fails as its file expects shows the pitfall; an expected refusal
  // or fault is a check that passed (the run was refused, as it should be).
  const bool outcome_check = v.check == nullptr || (v.check->kind != ScenarioCheckKind::kRefused &&
                                                    v.check->kind != ScenarioCheckKind::kFault);
  return !v.passed && outcome_check ? report::VerdictLook::kPitfall : report::VerdictLook::kAsExpected;
}

std::string VerdictWords(const CheckVerdict& v) {
  switch (VerdictLookOf(v)) {
    case report::VerdictLook::kAsExpected:
      return "as expected";
    case report::VerdictLook::kPitfall:
      return "the pitfall, as expected";
    case report::VerdictLook::kNotAsExpected:
      break;
  }
  return "NOT AS EXPECTED";
}

std::string FormatVerdictCount(const ScenarioResult& result) {
  std::size_t as_expected = 0;
  for (const auto& v : result.verdicts) as_expected += v.as_expected;
  return std::to_string(as_expected) + " of " + std::to_string(result.verdicts.size()) + " checks as expected";
}

std::string FormatRunText(const ScenarioResult& result, const std::string& text, const std::string& default_run) {
  std::string out;
  std::size_t at = 0;
  while (at < text.size()) {
    const auto open = text.find("{{", at), close = open == std::string::npos ? open : text.find("}}", open);
    if (close == std::string::npos) break;
    out += text.substr(at, open - at);
    const std::string name = text.substr(open + 2, close - open - 2);
    const auto dot = name.find('.');
    const std::string run = dot == std::string::npos ? default_run : name.substr(0, dot);
    const std::string value = dot == std::string::npos ? name : name.substr(dot + 1);
    double x = std::nan("");
    for (const auto& r : result.runs)
      if (r.name == run) x = r.Value(value);
    // Counts (replicas, steps, examples) as written; other values to 3 digits.
    const bool count = x == std::round(x) && std::fabs(x) < 1e15;
    out += std::isnan(x) ? text.substr(open, close + 2 - open) : Format(count ? "%.0f" : "%.3g", x);
    at = close + 2;
  }
  return out + text.substr(std::min(at, text.size()));
}

std::string FormatHeadline(const ScenarioResult& result) { return FormatRunText(result, result.scenario->headline); }

std::string FormatScenarioText(const ScenarioResult& result, int width) {
  return FormatScenarioText(result, ScenarioTextOptions{width, 0, false});
}

std::string FormatScenarioText(const ScenarioResult& result, const ScenarioTextOptions& options) {
  const Scenario& s = *result.scenario;
  const int width = options.table_width > 0 ? std::min(options.width, options.table_width) : options.width;
  const bool color = options.color;
  // Fitted to a terminal, the two heading lines wrap too (not on a file: goldens).
  std::string out = WrapLines("Scenario " + s.name + ": " + s.title + "\n", options.table_width);
  if (!s.headline.empty()) out += WrapLines("In one line: " + FormatHeadline(result) + "\n", options.table_width);
  if (!s.description.empty()) out += Wrap(FormatRunText(result, s.description), width, "");
  if (!result.runs.empty()) out += "\nRuns\n" + RenderTable(RunTable(result), options.table_width, color);
  for (const auto& r : result.runs)
    if (!r.run->description.empty() || !r.run->sets.empty()) {
      std::string line = r.name + ":";
      if (!r.run->description.empty()) line += " " + FormatRunText(result, r.run->description, r.name);
      const std::string sets = JoinText(r.run->sets, ", ");
      if (!sets.empty()) line += " [" + sets + "]";
      if (!r.run->resume_from.empty()) line += " (resumes the checkpoint of " + r.run->resume_from + ")";
      out += Wrap(line, width, "  ");
    }
  out += "\nChecks\n";
  const FittedTable checks = FitTable(CheckTable(result), options.table_width, color);
  out += checks.header;
  const std::string detail_indent = checks.stacked ? "    " : "       ";
  for (std::size_t i = 0; i < result.verdicts.size(); ++i) {
    const CheckVerdict& v = result.verdicts[i];
    out += checks.rows[i];
    // A detail with line breaks is a drawing: printed as it is, indented.
    if (v.detail.find('\n') != std::string::npos) {
      std::istringstream detail(v.detail);
      // On a terminal a line too wide wraps (the drawing's rows are short).
      for (std::string row; std::getline(detail, row);)
        out += WrapLines(detail_indent + row + "\n", options.table_width);
    } else if (!v.detail.empty()) {
      out += Wrap(v.detail, width, detail_indent);
    }
  }
  out += checks.note;
  const std::string verdict = "Verdict: " + FormatVerdictCount(result) +
                              (result.all_as_expected ? "." : " -- this scenario does not behave as its file expects.");
  out += "\n" + WrapLines(Paint(verdict, result.all_as_expected ? Tone::kPass : Tone::kFail, color) + "\n",
                          options.table_width);
  return out;
}

nlohmann::json ScenarioToJson(const ScenarioResult& result) {
  const Scenario& s = *result.scenario;
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& r : result.runs) {
    const TrainConfig& c = r.run->config;
    nlohmann::json run = {{"name", r.name},
                          {"strategy", StrategyName(c.cluster.strategy)},
                          {"replicas", c.cluster.replicas},
                          {"workers", c.cluster.workers},
                          {"global_batch", c.global_batch_size()},
                          {"split", Split(c)},
                          {"loss_code", c.cluster.loss().ShortName()},
                          {"math", MathModeName(c.cluster.math)},
                          {"status", r.status.ok() ? "ok" : (r.refused() ? "refused" : "fault")}};
    if (c.cluster.accumulation.on()) {
      run["accumulation_steps"] = c.cluster.accumulation.steps;
      run["accumulation"] = AccumulationRuleName(c.cluster.accumulation.rule);
    }
    if (!r.status.ok()) run["message"] = r.status.message();
    // FNV-1a of the final variables, as dtlab train --json prints it: equal digests, equal bits.
    if (r.status.ok()) {
      char digest[17];
      std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(r.report.weights_digest));
      run["weights_digest"] = digest;
    }
    nlohmann::json values = nlohmann::json::object();
    for (const auto& [name, value] : r.values)
      if (std::isfinite(value)) values[name] = value;
    run["values"] = values;
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& m : r.steps) {
      nlohmann::json step = {{"step", m.step},
                             {"epoch", m.epoch},
                             {"loss", m.loss},
                             {"accuracy", m.accuracy},
                             {"batch_sizes", m.batch_sizes}};
      if (m.checked) step["reference_passed"] = m.passed, step["max_ulp"] = m.max_ulp;
      steps.push_back(std::move(step));
    }
    run["steps"] = std::move(steps);
    if (r.report.reference_check && !r.report.reference_check->first_failure.empty())
      run["first_failure"] = r.report.reference_check->first_failure;
    runs.push_back(std::move(run));
  }
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& v : result.verdicts)
    checks.push_back({{"check", v.label},
                      {"expected", v.expected},
                      {"got", v.got},
                      {"as_expected", v.as_expected},
                      {"detail", v.detail}});
  return {{"scenario", s.name},
          {"title", s.title},
          {"runs", runs},
          {"checks", checks},
          {"all_as_expected", result.all_as_expected}};
}

Status WriteStepCsv(const ScenarioResult& result, const std::string& path) {
  std::string csv =
      "run,step,epoch,loss,mean_loss,accuracy,batch_sizes,replica_losses,reference_passed,max_ulp,distributed_norm,"
      "reference_norm\n";
  for (const auto& r : result.runs)
    for (const auto& m : r.steps) {
      std::string sizes, losses;
      sizes = JoinText(m.batch_sizes, ";", [](std::int64_t b) { return std::to_string(b); });
      losses = JoinText(m.replica_losses, ";", [](float l) { return Format("%.9g", l); });
      csv += r.name + "," + std::to_string(m.step) + "," + std::to_string(m.epoch) + "," + Format("%.9g", m.loss) +
             "," + Format("%.9g", m.mean_loss) + "," + Format("%.9g", m.accuracy) + "," + sizes + "," + losses + "," +
             (m.checked ? (m.passed ? "1" : "0") : "") + "," + (m.checked ? std::to_string(m.max_ulp) : "") + "," +
             (m.checked ? Format("%.9g", m.distributed_norm) : "") + "," +
             (m.checked ? Format("%.9g", m.reference_norm) : "") + "\n";
    }
  return WriteFileAtomically(path, csv);
}

Status WriteTensorBoard(const ScenarioResult& result, const std::string& directory) {
  for (const auto& r : result.runs) {
    DTLAB_ASSIGN_OR_RETURN(const std::string run_directory, RunDirectory(directory, r.name));
    DTLAB_ASSIGN_OR_RETURN(auto writer, TensorBoardWriter::Open(run_directory));
    for (const auto& m : r.steps) {
      DTLAB_RETURN_IF_ERROR(writer->AddScalar("train/loss", m.step, m.loss));
      DTLAB_RETURN_IF_ERROR(writer->AddScalar("train/accuracy", m.step, m.accuracy));
      if (m.checked) {
        DTLAB_RETURN_IF_ERROR(writer->AddScalar("reference/gradient_norm", m.step, m.reference_norm));
        DTLAB_RETURN_IF_ERROR(writer->AddScalar("reference/distributed_gradient_norm", m.step, m.distributed_norm));
        DTLAB_RETURN_IF_ERROR(writer->AddScalar("reference/max_ulp", m.step, static_cast<double>(m.max_ulp)));
      }
    }
    for (const auto& e : r.report.epochs) {
      DTLAB_RETURN_IF_ERROR(writer->AddScalar("epoch/train_loss", e.epoch, e.train_loss));
      DTLAB_RETURN_IF_ERROR(writer->AddScalar("epoch/train_accuracy", e.epoch, e.train_accuracy));
      DTLAB_RETURN_IF_ERROR(writer->AddScalar("epoch/test_loss", e.epoch, e.test_loss));
      DTLAB_RETURN_IF_ERROR(writer->AddScalar("epoch/test_accuracy", e.epoch, e.test_accuracy));
    }
    DTLAB_RETURN_IF_ERROR(writer->Close());
  }
  return Status::Ok();
}

std::vector<report::LinePlot> ScenarioLinePlots(const ScenarioResult& result) {
  report::LinePlot loss{"Loss per step", "step", "loss (SUM-reduced)", {}, false};
  report::LinePlot accuracy{"Training accuracy (running, per epoch)", "step", "accuracy", {}, false};
  report::LinePlot norms{"Gradient norm: distributed vs one-device reference", "step", "|gradient|", {}, false};
  for (const auto& r : result.runs) {
    report::Series l{r.name, {}, {}}, a{r.name, {}, {}}, d{r.name + " distributed", {}, {}},
        ref{r.name + " reference", {}, {}};
    for (const auto& m : r.steps) {
      const auto x = static_cast<double>(m.step);
      l.x.push_back(x), l.y.push_back(m.loss);
      a.x.push_back(x), a.y.push_back(m.accuracy);
      if (m.checked)
        d.x.push_back(x), d.y.push_back(m.distributed_norm), ref.x.push_back(x), ref.y.push_back(m.reference_norm);
    }
    if (l.x.empty()) continue;
    loss.series.push_back(l);
    accuracy.series.push_back(a);
    if (!d.x.empty()) norms.series.push_back(d), norms.series.push_back(ref);
  }
  std::vector<report::LinePlot> plots;
  if (!loss.series.empty()) plots.push_back(loss), plots.push_back(accuracy);
  if (!norms.series.empty()) plots.push_back(norms);
  return plots;
}

// Per-replica plots draw at most this many replicas (the first ones): a bar or a
// lane per replica of a 4096-replica run would make megabytes of unreadable SVG.
constexpr std::size_t kDrawnReplicas = 64;

// " (replicas 0-63 of 4096)" when a plot draws only the first replicas.
std::string DrawnReplicasText(std::size_t replicas) {
  if (replicas <= kDrawnReplicas) return "";
  return ", replicas 0-" + std::to_string(kDrawnReplicas - 1) + " of " + std::to_string(replicas);
}

std::vector<report::BarPlot> ScenarioBarPlots(const ScenarioResult& result) {
  if (result.runs.empty()) return {};
  const RunResult& main = result.runs.front();
  if (main.steps.empty()) return {};
  const std::size_t replicas = main.steps.front().batch_sizes.size();
  const std::size_t drawn = std::min(replicas, kDrawnReplicas);
  const std::string which = main.name + DrawnReplicasText(replicas);
  report::BarPlot sizes{"Per-replica batch sizes (" + which + ")", "replica", "examples", {}, {}};
  report::BarPlot losses{"Per-replica scaled losses (" + which + ")", "replica", "loss", {}, {}};
  for (std::size_t k = 0; k < drawn; ++k) {
    sizes.categories.push_back(std::to_string(k));
    losses.categories.push_back(std::to_string(k));
  }
  std::vector<const StepMetrics*> shown = {&main.steps.front()};
  if (main.steps.size() > 1) shown.push_back(&main.steps.back());
  for (const StepMetrics* m : shown) {
    report::Series s{"step " + std::to_string(m->step), {}, {}}, l{"step " + std::to_string(m->step), {}, {}};
    for (std::size_t k = 0; k < std::min(drawn, m->batch_sizes.size()); ++k)
      s.y.push_back(static_cast<double>(m->batch_sizes[k]));
    for (std::size_t k = 0; k < std::min(drawn, m->replica_losses.size()); ++k) l.y.push_back(m->replica_losses[k]);
    sizes.series.push_back(s);
    losses.series.push_back(l);
  }
  return {sizes, losses};
}

report::TimelinePlot ScenarioTimeline(const ScenarioResult& result, int steps) {
  report::TimelinePlot plot;
  if (result.runs.empty()) return plot;
  const auto& main = result.runs.front();
  const std::size_t replicas = main.steps.empty() ? 0 : main.steps.front().compute_seconds.size();
  plot.title = "Simulated timeline of the first steps (" + main.name + DrawnReplicasText(replicas) +
               "): compute, then all-reduce";
  plot.unit = "ms";
  double t = 0;
  for (int i = 0; i < steps && i < static_cast<int>(main.steps.size()); ++i) {
    const StepMetrics& m = main.steps[static_cast<std::size_t>(i)];
    const std::size_t drawn = std::min(m.compute_seconds.size(), kDrawnReplicas);
    double longest = 0;
    for (std::size_t r = 0; r < m.compute_seconds.size(); ++r) {
      if (r < drawn)
        plot.spans.push_back({"replica " + std::to_string(r), "step " + std::to_string(m.step) + " compute", "compute",
                              t * 1e3, (t + m.compute_seconds[r]) * 1e3});
      longest = std::max(longest, m.compute_seconds[r]);
    }
    t += longest;
    for (const auto& [name, seconds] : m.collectives) {
      for (std::size_t r = 0; r < drawn; ++r)
        plot.spans.push_back({"replica " + std::to_string(r), "step " + std::to_string(m.step) + " " + name,
                              name.substr(0, name.find('/')), t * 1e3, (t + seconds) * 1e3});
      t += seconds;
    }
  }
  return plot;
}

// Memory, per run that trained: the estimate it was admitted with and the peak
// resident set measured over it (sim/training/memory_estimate.h); with runs of
// several replica counts, also the measured peak against the replicas, one line per
// math mode. Measured on this machine, so the HTML report has it and the printed
// table (a golden output) does not.
void AddMemory(report::HtmlDocument& page, const ScenarioResult& result) {
  std::vector<std::vector<std::string>> rows;
  std::map<std::string, std::map<std::int32_t, double>> peaks;  // math mode -> replicas -> MiB
  for (const auto& r : result.runs) {
    if (!r.status.ok() || r.report.peak_resident_bytes <= 0) continue;
    const TrainConfig& c = r.run->config;
    const std::string math(MathModeName(c.cluster.math));
    rows.push_back({r.name, std::to_string(c.cluster.replicas), math,
                    r.report.folded_reduction ? "folded" : "collective", BytesText(r.report.estimated_peak_bytes),
                    BytesText(r.report.peak_resident_bytes)});
    peaks[math][c.cluster.replicas] = r.report.peak_resident_bytes / (1024.0 * 1024.0);
  }
  if (rows.empty()) return;
  page.AddHeading(2, "Memory");
  page.AddParagraph(
      "Peak resident set of the process over each run, measured on the machine that ran the scenario, beside "
      "the estimate the run was admitted with (docs/reliability.md, \"Memory\").");
  page.AddTable({"run", "replicas", "math", "gradients", "estimated peak", "measured peak"}, rows,
                {false, true, false, false, true, true});
  report::LinePlot plot{"Peak resident set against replicas",
                        "replicas (log2: 6 is 64, 12 is 4096)",
                        "peak resident set (MiB)",
                        {},
                        false};
  for (const auto& [math, by_replicas] : peaks) {
    if (by_replicas.size() < 2) continue;
    report::Series series{math + " mode", {}, {}};
    for (const auto& [replicas, mib] : by_replicas)
      series.x.push_back(std::log2(static_cast<double>(replicas))), series.y.push_back(mib);
    plot.series.push_back(std::move(series));
  }
  if (!plot.series.empty()) page.AddPlot(plot);
}

std::string RenderScenarioReport(const ScenarioResult& result) {
  const Scenario& s = *result.scenario;
  report::HtmlDocument page("dtlab scenario " + s.name + ": " + s.title);
  page.AddHeading(1, s.title);
  if (!s.description.empty()) page.AddParagraph(FormatRunText(result, s.description));
  page.AddHeading(2, "Verdicts");
  for (const auto& v : result.verdicts) {
    const report::VerdictLook kind = VerdictLookOf(v);
    // An expected failure reads as the pitfall, in its own colour, not as a green "FAIL".
    const std::string outcome = kind == report::VerdictLook::kPitfall ? v.got + " (the pitfall, as expected)" : v.got;
    page.AddVerdict(outcome, kind, v.label + " (expected " + v.expected + "): " + v.detail);
  }
  page.AddParagraph("Verdict: " + FormatVerdictCount(result) + ".");
  const TextTable runs = RunTable(result);
  if (!runs.rows.empty()) {
    page.AddHeading(2, "Runs");
    std::vector<std::string> header;
    for (const auto& column : runs.columns) header.push_back(column.header);
    page.AddTable(header, runs.rows, {false, false, true, false, false, true, true, true, false});
  }
  for (const auto& r : result.runs)
    if (!r.status.ok()) page.AddParagraph(r.name + ": " + r.status.message());
  AddMemory(page, result);
  page.AddHeading(2, "Plots");
  for (const auto& plot : ScenarioLinePlots(result)) page.AddPlot(plot);
  for (const auto& plot : ScenarioBarPlots(result)) page.AddPlot(plot);
  const report::TimelinePlot timeline = ScenarioTimeline(result);
  if (!timeline.spans.empty()) page.AddPlot(timeline);
  page.AddHeading(2, "As printed");
  page.AddPreformatted(FormatScenarioText(result));
  return page.Render();
}

}  // namespace dtlab
