// Writes a sample report page to argv[1]: one plot of each kind, a table and
// verdicts. tests/cli/html_render.sh opens it in headless Chromium to check that the
// page really renders (until a dtlab command writes HTML itself).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "scenarios/html_report.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "Usage: html_report_demo OUTPUT.html\n");
    return 2;
  }
  using namespace dtlab::report;
  HtmlDocument doc("dtlab demo report");
  doc.AddHeading(1, "dtlab demo report");
  doc.AddParagraph("A sample page with one plot of each kind.\n\nRun it again with `--seed 7`: same <bytes> & all.");

  LinePlot loss{"Training loss", "step", "loss", {}, true};
  Series mirrored{"mirrored (4 replicas)", {}, {}}, single{"one device", {}, {}};
  for (int step = 0; step <= 100; ++step) {
    mirrored.x.push_back(step), single.x.push_back(step);
    mirrored.y.push_back(2.3 * std::exp(-step / 25.0) + 0.05);
    single.y.push_back(step == 40 ? NAN : 2.3 * std::exp(-step / 30.0) + 0.08);  // a gap at step 40
  }
  loss.series = {mirrored, single};
  doc.AddPlot(loss);

  BarPlot batches{"Examples per replica",
                  "replica",
                  "examples",
                  {"replica 0", "replica 1", "replica 2", "replica 3"},
                  {{"step 1", {}, {16, 16, 16, 16}}, {"last step", {}, {16, 16, 12, 0}}}};
  doc.AddPlot(batches);

  TimelinePlot timeline{"One step", "ms", {}};
  for (int r = 0; r < 3; ++r) {
    const std::string lane = "replica " + std::to_string(r);
    const double compute = 4.0 + r;
    timeline.spans.push_back({lane, "forward+backward", "compute", 0, compute});
    timeline.spans.push_back({lane, "wait", "idle", compute, 6.0});
    timeline.spans.push_back({lane, "all-reduce", "all-reduce", 6.0, 8.5});
  }
  doc.AddPlot(timeline);

  doc.AddHeading(2, "Verdicts");
  doc.AddTable({"property", "trials", "max error"},
               {{"correct-scaling", "1000", "0"}, {"per-replica-mean", "1000", "1.5e-3"}}, {false, true, true});
  doc.AddVerdict("PASS", true, "correct-scaling held for 1000 trials");
  doc.AddVerdict("CAUGHT", true, "per-replica-mean weighs every example 4x");
  doc.AddVerdict("FAIL", false, "checkpoint-restore differs at step 3");
  doc.AddPreformatted("correct-scaling   PASS\nper-replica-mean  CAUGHT");

  std::ofstream out(argv[1], std::ios::binary);
  out << doc.Render();
  out.close();
  if (!out) {
    std::fprintf(stderr, "html_report_demo: cannot write %s\n", argv[1]);
    return 3;
  }
  return 0;
}
