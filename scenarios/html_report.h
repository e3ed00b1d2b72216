// Self-contained HTML pages with inline SVG plots: the scenario report
// (`dtlab run --report`) and the lesson handout (`dtlab lesson --html`).
//
// A page is built from blocks (headings, paragraphs, tables, preformatted text and
// plots) and rendered to one HTML string with no external resource: no script or
// style sheet is fetched, every plot is an inline <svg>, so the file can be mailed
// or opened offline (write it with WriteFileAtomically, core/file_io.h). Text is
// HTML-escaped; numbers are printed with a fixed precision, so the same input gives
// the same bytes (golden tests rely on it). Plots use a colour-blind-safe palette
// (Okabe-Ito); non-finite or unplottable values are left out, never printed as NaN.
//
// The page carries one small inline script: after layout it counts the plots
// (svg.dtlab-plot) that got a non-zero size into <body data-plots-rendered="N"
// data-plots-empty="M">, so a headless browser can check that the page rendered
// (tests/cli/html_render.sh).
//
// Thread safety: a HtmlDocument is a value; distinct objects may be used concurrently.
#pragma once

#include <string>
#include <vector>

namespace dtlab::report {

/// One named curve or bar set: y[i] at x[i] (x and y have the same length).
struct Series {
  std::string name;
  std::vector<double> x, y;
};

/// Lines over a shared x axis (loss per step, accuracy per epoch, gradient norms).
/// Non-finite y values break the line (they are not drawn).
struct LinePlot {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  bool log_y = false;  // log scale (values <= 0 are not drawn)
};

/// Grouped bars: one group per category, one bar per series in each group (for
/// example per-replica batch sizes, one series per step).
struct BarPlot {
  std::string title, x_label, y_label;
  std::vector<std::string> categories;
  std::vector<Series> series;  // series[k].y[i] is the bar of series k in category i (x unused)
};

/// A span of time on one lane of a timeline (a replica's compute, a collective phase).
struct TimelineSpan {
  std::string lane;   // a row, e.g. "replica 0"
  std::string label;  // shown on hover (<title>) and inside the bar when it fits
  std::string kind;   // colour class, e.g. "compute", "all-reduce", "idle"
  double start = 0, end = 0;
};

struct TimelinePlot {
  std::string title, unit = "ms";  // unit of start and end
  std::vector<TimelineSpan> spans;
};

/// SVG elements (an `<svg>` element with its children, with width, height and viewBox set) for one plot:
/// 640 units wide, about 320 high (more when the legend wraps or a timeline has many
/// lanes), class "dtlab-plot". An empty plot draws its axes and says "no data".
std::string RenderSvg(const LinePlot& plot);
std::string RenderSvg(const BarPlot& plot);
std::string RenderSvg(const TimelinePlot& plot);

/// How a verdict looks: as expected (green, a check mark), the pitfall as expected
/// (amber, a warning sign: a failure the page predicts), not as expected (red, a cross).
enum class VerdictLook { kAsExpected, kPitfall, kNotAsExpected };

/// A link of a list (AddLinks): `href` is written as given (escaped), so a
/// relative file name links to a file beside the page.
struct Link {
  std::string href, text, note;  // note: plain text after the link, may be empty
};

/// A page under construction. Blocks appear in the order they are added.
class HtmlDocument {
 public:
  explicit HtmlDocument(std::string title);  // the page's <title>; add a heading to show it

  void AddHeading(int level, const std::string& text);  // level 1..4
  /// Plain text; blank lines split paragraphs, `backticks` mark code (as in headings and verdicts).
  void AddParagraph(const std::string& text);
  void AddPreformatted(const std::string& text);  // monospace, e.g. a verdict table as printed
  /// A table; `numeric_columns[i]` right-aligns column i (may be shorter than header).
  void AddTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                const std::vector<bool>& numeric_columns = {});
  void AddPlot(const LinePlot& plot);
  void AddPlot(const BarPlot& plot);
  void AddPlot(const TimelinePlot& plot);
  /// An SVG already rendered by RenderSvg (inserted as is; not escaped).
  void AddSvg(const std::string& svg);
  /// A bulleted list of links, each with its note.
  void AddLinks(const std::vector<Link>& links);
  /// A verdict line, coloured by outcome: "PASS", "FAIL", "CAUGHT", ... and its text.
  void AddVerdict(const std::string& outcome, bool as_expected, const std::string& text) {
    AddVerdict(outcome, as_expected ? VerdictLook::kAsExpected : VerdictLook::kNotAsExpected, text);
  }
  void AddVerdict(const std::string& outcome, VerdictLook look, const std::string& text);

  /// The whole page: <!DOCTYPE html> ... with an inline style sheet.
  std::string Render() const;

 private:
  std::string title_;
  std::vector<std::string> blocks_;  // rendered HTML of each block
};

}  // namespace dtlab::report
