// FormatRunText: headlines and descriptions quote the numbers of the runs they
// describe (a --set included), not the numbers the file was written with.
#include <gtest/gtest.h>

#include <string>

#include "scenarios/scenario_report.h"
#include "scenarios/scenario_runner.h"

namespace dtlab {
namespace {

ScenarioResult TwoRuns() {
  ScenarioResult result;
  RunResult main;
  main.name = "main";
  main.values = {{"replicas", 8}, {"global_batch", 4096}, {"gradient_ratio", 7.99871}};
  RunResult fixed;
  fixed.name = "fixed";
  fixed.values = {{"replicas", 8}, {"global_batch", 256}, {"gradient_ratio", 1.0}};
  result.runs = {main, fixed};
  return result;
}

TEST(FormatRunText, FillsValuesOfTheDefaultRunAndOfNamedRuns) {
  const ScenarioResult result = TwoRuns();
  EXPECT_EQ(FormatRunText(result, "{{replicas}} replicas, {{replicas}}x."), "8 replicas, 8x.");
  EXPECT_EQ(FormatRunText(result, "ratio {{gradient_ratio}}, fixed {{fixed.gradient_ratio}}"), "ratio 8, fixed 1");
  EXPECT_EQ(FormatRunText(result, "global_batch_size={{global_batch}}", "fixed"), "global_batch_size=256");
  EXPECT_EQ(FormatRunText(result, "main's {{main.global_batch}}", "fixed"), "main's 4096");
}

TEST(FormatRunText, CountsAreWholeNumbersAndOtherValuesHaveThreeDigits) {
  const ScenarioResult result = TwoRuns();
  // %.3g alone would print 4096 as 4.1e+03.
  EXPECT_EQ(FormatRunText(result, "{{global_batch}}"), "4096");
  EXPECT_EQ(FormatRunText(result, "{{gradient_ratio}}"), "8");
  ScenarioResult fractional = TwoRuns();
  fractional.runs[0].values = {{"test_accuracy", 0.86213}};
  EXPECT_EQ(FormatRunText(fractional, "accuracy {{test_accuracy}}"), "accuracy 0.862");
}

TEST(FormatRunText, LeavesUnknownNamesAndUnclosedBracesAsWritten) {
  const ScenarioResult result = TwoRuns();
  EXPECT_EQ(FormatRunText(result, "{{no_such_value}} and {{other.replicas}}"),
            "{{no_such_value}} and {{other.replicas}}");
  EXPECT_EQ(FormatRunText(result, "{{replicas}} then {{replicas"), "8 then {{replicas");
  EXPECT_EQ(FormatRunText(result, ""), "");
}

}  // namespace
}  // namespace dtlab

namespace dtlab {
namespace {

// A run of many replicas: the per-replica plots draw the first 64 and say so, so
// that a 4096-replica report stays small; a small run is drawn whole.
TEST(ScenarioPlots, DrawAtMost64Replicas) {
  for (const std::size_t replicas : {std::size_t{8}, std::size_t{4096}}) {
    ScenarioResult result;
    RunResult main;
    main.name = "main";
    StepMetrics step;
    step.step = 1;
    step.batch_sizes.assign(replicas, 1);
    step.replica_losses.assign(replicas, 0.5f);
    step.compute_seconds.assign(replicas, 1e-3);
    step.collectives = {{"all_reduce/ring", 2e-3}};
    main.steps = {step};
    result.runs = {main};
    const std::size_t drawn = std::min<std::size_t>(replicas, 64);
    const std::vector<report::BarPlot> bars = ScenarioBarPlots(result);
    ASSERT_EQ(bars.size(), 2u);
    for (const report::BarPlot& plot : bars) {
      EXPECT_EQ(plot.categories.size(), drawn);
      ASSERT_EQ(plot.series.size(), 1u);
      EXPECT_EQ(plot.series[0].y.size(), drawn);
      EXPECT_EQ(plot.title.find("replicas 0-63 of 4096") != std::string::npos, replicas == 4096) << plot.title;
    }
    const report::TimelinePlot timeline = ScenarioTimeline(result);
    EXPECT_EQ(timeline.spans.size(), 2 * drawn);  // compute and the all-reduce, per drawn replica
    EXPECT_EQ(timeline.title.find("replicas 0-63 of 4096") != std::string::npos, replicas == 4096);
  }
}

}  // namespace
}  // namespace dtlab
