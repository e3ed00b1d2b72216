#include "scenarios/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <string_view>
#include <utility>

namespace dtlab::report {

namespace {

// Layout, in SVG user units (= CSS pixels at 100%). Text widths are estimated from
// the character count, since there is no font metrics without a browser.
constexpr double kWidth = 640;
constexpr double kAreaHeight = 220;  // the plot area of line and bar plots
constexpr double kRightMargin = 20;
constexpr double kBottomMargin = 44;  // tick labels and the x label
constexpr double kCharWidth = 6.2;    // an 11px sans-serif character, on average
constexpr double kLegendRow = 16;

// Okabe-Ito colours (distinguishable with the common colour-vision deficiencies),
// with dark grey for black and Tol's olive for yellow, which is unreadable on white.
// `text` is the label colour that stays readable on `fill`.
struct Colour {
  const char* fill;
  const char* text;
};
constexpr Colour kPalette[] = {{"#0072B2", "#fff"}, {"#E69F00", "#000"}, {"#009E73", "#fff"}, {"#D55E00", "#fff"},
                               {"#CC79A7", "#000"}, {"#56B4E9", "#000"}, {"#444444", "#fff"}, {"#999933", "#000"}};
constexpr std::size_t kColours = std::size(kPalette);

std::string Escape(const std::string& text) {
  static constexpr std::string_view kSpecial = "&<>\"'";
  static constexpr const char* kEntity[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"};
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const std::size_t i = kSpecial.find(c);
    out += i == std::string_view::npos ? std::string_view(&c, 1) : std::string_view(kEntity[i]);
  }
  return out;
}

// A coordinate with 2 decimals: byte-stable, and never "nan", "inf" or "-0.00"
// (non-finite values are filtered before; this is the last guard).
std::string Num(double v) {
  if (!std::isfinite(v)) v = 0;
  char text[48];
  std::snprintf(text, sizeof(text), "%.2f", v);
  return std::string(text) == "-0.00" ? "0.00" : text;
}

// A value as people read it: tick labels, values in tooltips.
std::string Short(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", v);
  return text;
}

// Cuts `text` to at most `chars` bytes (on a UTF-8 character boundary), marking the cut.
std::string Truncate(const std::string& text, std::size_t chars) {
  if (text.size() <= chars) return text;
  std::size_t cut = chars > 1 ? chars - 1 : 0;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "\xE2\x80\xA6";  // U+2026 ellipsis
}

double TextWidth(const std::string& text) { return static_cast<double>(text.size()) * kCharWidth; }

struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void Add(double v) { lo = std::min(lo, v), hi = std::max(hi, v); }
  bool empty() const { return !(lo <= hi); }
};

// An axis over [lo, hi] (hi > lo) with tick positions; on a log axis every value,
// tick included, is log10 of the data and labels show 10^tick.
struct Axis {
  double lo = 0, hi = 1;
  std::vector<double> ticks;
  bool log = false;
  double Fraction(double v) const { return (v - lo) / (hi - lo); }
  std::string Label(double tick) const { return Short(log ? std::pow(10.0, tick) : tick); }
};

// 1, 2 or 5 times a power of ten, near `raw`.
double NiceStep(double raw) {
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double fraction = raw / magnitude;
  return magnitude * (fraction < 1.5 ? 1 : fraction < 3 ? 2 : fraction < 7 ? 5 : 10);
}

// About `target` ticks; the range widens to whole steps so that the frame starts
// and ends on a labelled tick. An `integer` axis (steps, epochs, examples) has
// whole-number ticks only: never "1.5 steps".
Axis LinearAxis(Range range, int target = 5, bool integer = false) {
  if (range.empty()) range = {0, 1};  // no data: an empty but well-formed axis
  range.lo = std::clamp(range.lo, -1e300, 1e300), range.hi = std::clamp(range.hi, -1e300, 1e300);
  if (range.hi - range.lo <= std::max(std::abs(range.lo), std::abs(range.hi)) * 1e-12) {
    const double pad = range.lo == 0 ? 1 : std::abs(range.lo) * 0.1;  // all equal: centre them
    range.lo -= pad, range.hi += pad;
  }
  double step = NiceStep(range.hi / target - range.lo / target);  // no overflow near 1e300
  if (integer) step = std::max(step, 1.0);                        // 1, 2, 5 x 10^k: whole numbers from 1 up
  Axis axis;
  axis.lo = std::floor(range.lo / step) * step;
  axis.hi = std::ceil(range.hi / step) * step;
  const long n = std::min(40L, std::lround((axis.hi - axis.lo) / step));
  // lo is a whole number of steps, so the tick at 0 is exactly 0 (never "-1.4e-17").
  for (long i = 0; i <= n; ++i) axis.ticks.push_back(axis.lo + static_cast<double>(i) * step);
  return axis;
}

// Whole decades, thinned to at most about 7 labels.
Axis LogAxis(Range range) {
  if (range.empty()) range = {0, 1};
  Axis axis;
  axis.log = true;
  double lo = std::floor(range.lo), hi = std::ceil(range.hi);
  if (lo == hi) hi = lo + 1;
  const double step = std::max(1.0, std::ceil((hi - lo) / 6));
  axis.lo = std::floor(lo / step) * step;
  axis.hi = std::ceil(hi / step) * step;
  for (double t = axis.lo; t <= axis.hi + 0.5; t += step) axis.ticks.push_back(t);
  return axis;
}

// Whether every finite value is a whole number (so its axis ticks should be too).
bool AllWhole(const std::vector<double>& values) {
  return std::all_of(values.begin(), values.end(), [](double v) { return !std::isfinite(v) || v == std::round(v); });
}

// Line styles after colour, so that lines stay apart where colours are hard to tell
// or one line lies on another: solid, dashed, dotted, dash-dot.
constexpr const char* kDashes[] = {"", "7 4", "2 3", "10 3 2 3"};

struct Frame {  // the plot area
  double left, top, width, height;
  double X(const Axis& a, double v) const { return left + width * a.Fraction(v); }
  double Y(const Axis& a, double v) const { return top + height * (1 - a.Fraction(v)); }
  double bottom() const { return top + height; }
};

void Text(std::string& out, double x, double y, const char* anchor, const std::string& text,
          const std::string& extra = "") {
  out += "<text x=\"" + Num(x) + "\" y=\"" + Num(y) + "\" text-anchor=\"" + anchor + "\"" + extra + ">" + Escape(text) +
         "</text>\n";
}

void Line(std::string& out, double x1, double y1, double x2, double y2, const char* stroke) {
  out += "<line x1=\"" + Num(x1) + "\" y1=\"" + Num(y1) + "\" x2=\"" + Num(x2) + "\" y2=\"" + Num(y2) + "\" stroke=\"" +
         stroke + "\"/>\n";
}

std::string SvgOpen(double height, const std::string& title) {
  const std::string h = std::to_string(std::lround(height));  // whole pixels
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"dtlab-plot\" width=\"640\" height=\"" + h +
         "\" viewBox=\"0 0 640 " + h + "\" role=\"img\" aria-label=\"" + Escape(title) +
         "\" font-family=\"sans-serif\" font-size=\"11\">\n";
}

// The title, then legend entries flowing left to right and wrapping: the legend sits
// above the plot area, where it can never hide a line. Returns the y where the
// plot area may start.
double Header(std::string& out, const std::string& title, const std::vector<std::pair<std::string, Colour>>& entries,
              bool line_swatch, const std::vector<std::string>& notes = {}) {
  Text(out, kWidth / 2, 20, "middle", title, " font-size=\"14\" font-weight=\"bold\"");
  double x = 56, y = 40;
  for (std::size_t k = 0; k < entries.size(); ++k) {
    const auto& [name, colour] = entries[k];
    const double w = 22 + TextWidth(name) + 14;
    if (x + w > kWidth - kRightMargin && x > 56) x = 56, y += kLegendRow;
    if (line_swatch) {  // the line's colour and dashes
      const char* dash = kDashes[k % std::size(kDashes)];
      out += "<line x1=\"" + Num(x) + "\" y1=\"" + Num(y - 4) + "\" x2=\"" + Num(x + 18) + "\" y2=\"" + Num(y - 4) +
             "\" stroke=\"" + colour.fill + "\" stroke-width=\"3\"" +
             (*dash ? std::string(" stroke-dasharray=\"") + dash + "\"" : "") + "/>\n";
    } else {
      out += "<rect x=\"" + Num(x + 2) + "\" y=\"" + Num(y - 9) + "\" width=\"11\" height=\"11\" fill=\"" +
             colour.fill + "\"/>\n";
    }
    Text(out, x + 22, y, "start", name);
    x += w;
  }
  for (const std::string& note : notes) {  // under the legend, one line each, in the plot's width
    y += kLegendRow;
    Text(out, 56, y, "start", Truncate(note, static_cast<std::size_t>((kWidth - 56 - kRightMargin) / kCharWidth)),
         " class=\"overlap-note\" fill=\"#555\" font-style=\"italic\"");
  }
  return (entries.empty() && notes.empty() ? 28 : y) + 16;
}

// Grid lines, axis lines, tick labels and axis labels. `x_axis` is null for
// categorical x (bar plots), whose labels the caller draws.
void DrawAxes(std::string& out, const Frame& f, const Axis* x_axis, const Axis& y_axis, const std::string& x_label,
              const std::string& y_label) {
  for (double t : y_axis.ticks) {
    const double y = f.Y(y_axis, t);
    Line(out, f.left, y, f.left + f.width, y, "#e4e4e4");
    Text(out, f.left - 6, y + 4, "end", y_axis.Label(t));
  }
  if (x_axis != nullptr) {
    for (double t : x_axis->ticks) {
      const double x = f.X(*x_axis, t);
      Line(out, x, f.bottom(), x, f.bottom() + 4, "#333");
      Text(out, x, f.bottom() + 16, "middle", x_axis->Label(t));
    }
  }
  Line(out, f.left, f.top, f.left, f.bottom(), "#333");
  Line(out, f.left, f.bottom(), f.left + f.width, f.bottom(), "#333");
  Text(out, f.left + f.width / 2, f.bottom() + 36, "middle", x_label);
  const double cy = f.top + f.height / 2;
  Text(out, 14, cy, "middle", y_label, " transform=\"rotate(-90 14.00 " + Num(cy) + ")\"");
}

void NoData(std::string& out, const Frame& f) {
  Text(out, f.left + f.width / 2, f.top + f.height / 2 + 4, "middle", "no data",
       " fill=\"#777\" font-style=\"italic\"");
}

double LeftMargin(const Axis& y_axis) {
  std::size_t chars = 0;
  for (double t : y_axis.ticks) chars = std::max(chars, y_axis.Label(t).size());
  return std::max(48.0, 30 + static_cast<double>(chars) * kCharWidth);
}

struct Point {
  double x, y;
};

// The drawable runs of a series: a non-finite value (or one <= 0 on a log scale)
// ends a run, so a gap shows where the data has none.
std::vector<std::vector<Point>> Runs(const Series& s, bool log_y) {
  std::vector<std::vector<Point>> runs(1);
  for (std::size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
    const double x = s.x[i], y = s.y[i];
    if (!std::isfinite(x) || !std::isfinite(y) || (log_y && y <= 0)) {
      if (!runs.back().empty()) runs.emplace_back();
      continue;
    }
    runs.back().push_back({x, log_y ? std::log10(y) : y});
  }
  if (runs.back().empty()) runs.pop_back();
  return runs;
}

// FNV-1a: a kind's colour depends on its name alone.
std::uint32_t Hash(const std::string& text) {
  std::uint32_t h = 2166136261u;
  for (char c : text) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return h;
}

}  // namespace

std::string RenderSvg(const LinePlot& plot) {
  std::vector<std::vector<std::vector<Point>>> runs;
  Range xr, yr;
  for (const Series& s : plot.series) {
    runs.push_back(Runs(s, plot.log_y));
    for (const auto& run : runs.back()) {
      for (const Point& p : run) xr.Add(p.x), yr.Add(p.y);
    }
  }
  bool whole_x = true;
  for (const Series& s : plot.series) whole_x = whole_x && AllWhole(s.x);
  const Axis x_axis = LinearAxis(xr, 8, whole_x), y_axis = plot.log_y ? LogAxis(yr) : LinearAxis(yr);

  // A line within a pixel of an earlier one everywhere would hide it: such a group
  // is drawn wider the earlier it comes (the first beneath), and a note names it.
  const double pixels = kAreaHeight / (y_axis.hi - y_axis.lo);
  auto same = [&](const auto& a, const auto& b) {  // the runs of two series
    bool equal = a.size() == b.size() && !a.empty();
    for (std::size_t r = 0; equal && r < a.size(); ++r) {
      equal = a[r].size() == b[r].size();
      for (std::size_t i = 0; equal && i < a[r].size(); ++i)
        equal = a[r][i].x == b[r][i].x && std::abs(a[r][i].y - b[r][i].y) * pixels <= 1;
    }
    return equal;
  };
  std::vector<std::size_t> group(runs.size());
  std::vector<int> above(runs.size(), 0);  // later lines of the same group
  for (std::size_t k = 0; k < runs.size(); ++k) {
    group[k] = k;
    for (std::size_t j = 0; j < k && group[k] == k; ++j)
      if (group[j] == j && same(runs[j], runs[k])) group[k] = j;
    for (std::size_t j = 0; j < k; ++j) above[j] += group[j] == group[k];
  }
  std::vector<std::string> notes;
  for (std::size_t j = 0; j < runs.size(); ++j) {
    if (group[j] != j || above[j] == 0) continue;
    notes.push_back("Lines overlap (wider beneath): " + plot.series[j].name);
    for (std::size_t k = j + 1; k < runs.size(); ++k)
      if (group[k] == j) notes.back() += " = " + plot.series[k].name;
  }

  std::vector<std::pair<std::string, Colour>> legend;
  for (std::size_t k = 0; k < plot.series.size(); ++k) legend.emplace_back(plot.series[k].name, kPalette[k % kColours]);
  std::string body;
  const double top = Header(body, plot.title, legend, true, notes);
  const double left = LeftMargin(y_axis);
  const Frame f{left, top, kWidth - left - kRightMargin, kAreaHeight};
  DrawAxes(body, f, &x_axis, y_axis, plot.x_label, plot.y_label);
  if (xr.empty()) NoData(body, f);

  for (std::size_t k = 0; k < runs.size(); ++k) {
    const char* colour = kPalette[k % kColours].fill;
    const std::string title = "<title>" + Escape(plot.series[k].name) + "</title>";
    std::string d;
    for (const auto& run : runs[k]) {
      if (run.size() == 1) {  // a lone point has no line: mark it
        body += "<circle cx=\"" + Num(f.X(x_axis, run[0].x)) + "\" cy=\"" + Num(f.Y(y_axis, run[0].y)) +
                "\" r=\"3\" fill=\"" + colour + "\">" + title + "</circle>\n";
        continue;
      }
      for (std::size_t i = 0; i < run.size(); ++i) {
        d += (i == 0 ? (d.empty() ? "M" : " M") : " L") + Num(f.X(x_axis, run[i].x)) + " " + Num(f.Y(y_axis, run[i].y));
      }
    }
    if (!d.empty()) {
      const char* dash = kDashes[k % std::size(kDashes)];
      body += "<path d=\"" + d + "\" fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"" +
              Num(2 + 2.5 * std::max(0, above[k])) + "\"" +
              (*dash ? std::string(" stroke-dasharray=\"") + dash + "\"" : "") +
              " stroke-linejoin=\"round\" stroke-linecap=\"round\">" + title + "</path>\n";
    }
  }
  return SvgOpen(f.bottom() + kBottomMargin, plot.title) + body + "</svg>\n";
}

std::string RenderSvg(const BarPlot& plot) {
  const std::size_t n = plot.categories.size(), k_series = plot.series.size();
  Range yr;
  for (const Series& s : plot.series) {
    for (std::size_t i = 0; i < std::min(n, s.y.size()); ++i) {
      if (std::isfinite(s.y[i])) yr.Add(s.y[i]);
    }
  }
  const bool empty = yr.empty();
  if (!empty) yr.Add(0);  // bars grow from 0 (the range reaches below 0 for negative values)
  bool whole = true;
  for (const Series& s : plot.series) whole = whole && AllWhole(s.y);
  const Axis y_axis = LinearAxis(yr, 5, whole);  // counts (examples per replica) get whole ticks

  std::vector<std::pair<std::string, Colour>> legend;
  for (std::size_t k = 0; k < k_series; ++k) legend.emplace_back(plot.series[k].name, kPalette[k % kColours]);
  std::string body;
  const double top = Header(body, plot.title, legend, false);
  const double left = LeftMargin(y_axis);
  const Frame f{left, top, kWidth - left - kRightMargin, kAreaHeight};
  DrawAxes(body, f, nullptr, y_axis, plot.x_label, plot.y_label);
  if (empty) NoData(body, f);

  const double group = n == 0 ? 0 : f.width / static_cast<double>(n);
  const double bar = k_series == 0 ? 0 : group * 0.8 / static_cast<double>(k_series);
  const double gap = bar > 4 ? 1 : 0;  // a hairline between neighbouring bars
  const double zero = f.Y(y_axis, std::clamp(0.0, y_axis.lo, y_axis.hi));
  for (std::size_t i = 0; i < n; ++i) {
    const double gx = f.left + group * static_cast<double>(i);
    const std::string& category = plot.categories[i];
    const auto fit = static_cast<std::size_t>(std::max(1.0, (group - 4) / kCharWidth));
    Text(body, gx + group / 2, f.bottom() + 16, "middle", Truncate(category, fit));
    for (std::size_t k = 0; k < k_series; ++k) {
      const Series& s = plot.series[k];
      if (i >= s.y.size() || !std::isfinite(s.y[i])) continue;
      const double y = f.Y(y_axis, s.y[i]);
      const std::string what = s.name.empty() ? category : s.name + ", " + category;
      body += "<rect x=\"" + Num(gx + group * 0.1 + bar * static_cast<double>(k)) + "\" y=\"" + Num(std::min(y, zero)) +
              "\" width=\"" + Num(bar - gap) + "\" height=\"" + Num(std::abs(zero - y)) + "\" fill=\"" +
              kPalette[k % kColours].fill + "\"><title>" + Escape(what + ": " + Short(s.y[i])) + "</title></rect>\n";
    }
  }
  if (y_axis.lo < 0) Line(body, f.left, zero, f.left + f.width, zero, "#333");
  return SvgOpen(f.bottom() + kBottomMargin, plot.title) + body + "</svg>\n";
}

std::string RenderSvg(const TimelinePlot& plot) {
  constexpr double kRowHeight = 22, kRowGap = 6;
  std::vector<std::string> lanes, kinds;  // in order of first appearance
  std::map<std::string, std::size_t> lane_row;
  Range tr;
  for (const TimelineSpan& span : plot.spans) {
    if (!std::isfinite(span.start) || !std::isfinite(span.end)) continue;
    if (lane_row.emplace(span.lane, lanes.size()).second) lanes.push_back(span.lane);
    if (std::find(kinds.begin(), kinds.end(), span.kind) == kinds.end()) kinds.push_back(span.kind);
    tr.Add(span.start), tr.Add(span.end);
  }
  // Each kind takes the palette slot its name hashes to, or the next free one, in
  // name order: "compute" gets the same colour in every timeline of a report unless
  // two kinds collide, and kinds in one plot differ while there are colours left.
  std::vector<std::string> sorted = kinds;
  std::sort(sorted.begin(), sorted.end());
  std::map<std::string, std::size_t> slot;
  std::vector<bool> taken(kColours);
  for (const std::string& kind : sorted) {
    std::size_t s = Hash(kind) % kColours;
    for (std::size_t probe = 0; probe < kColours && taken[s]; ++probe) s = (s + 1) % kColours;
    taken[s] = true;
    slot[kind] = s;
  }

  const Axis t_axis = LinearAxis(tr, 8);
  std::vector<std::pair<std::string, Colour>> legend;
  for (const std::string& kind : kinds) legend.emplace_back(kind, kPalette[slot[kind]]);
  std::string body;
  const double top = Header(body, plot.title, legend, false);
  double left = 48;
  for (const std::string& lane : lanes) left = std::max(left, TextWidth(lane) + 16);
  left = std::min(left, 200.0);
  const std::size_t rows = std::max<std::size_t>(lanes.size(), 1);
  const Frame f{left, top, kWidth - left - kRightMargin, static_cast<double>(rows) * (kRowHeight + kRowGap) + kRowGap};

  for (double t : t_axis.ticks) {
    const double x = f.X(t_axis, t);
    Line(body, x, f.top, x, f.bottom(), "#e4e4e4");
    Text(body, x, f.bottom() + 16, "middle", t_axis.Label(t));
  }
  for (std::size_t r = 0; r < lanes.size(); ++r) {
    const double y = f.top + kRowGap + static_cast<double>(r) * (kRowHeight + kRowGap);
    body += "<rect x=\"" + Num(f.left) + "\" y=\"" + Num(y) + "\" width=\"" + Num(f.width) + "\" height=\"" +
            Num(kRowHeight) + "\" fill=\"#000\" fill-opacity=\"0.04\"/>\n";
    Text(body, f.left - 8, y + kRowHeight / 2 + 4, "end", lanes[r]);
  }
  Line(body, f.left, f.bottom(), f.left + f.width, f.bottom(), "#333");
  Text(body, f.left + f.width / 2, f.bottom() + 36, "middle", "time (" + plot.unit + ")");
  if (tr.empty()) NoData(body, f);

  for (const TimelineSpan& span : plot.spans) {
    if (!std::isfinite(span.start) || !std::isfinite(span.end)) continue;
    const double start = std::min(span.start, span.end), end = std::max(span.start, span.end);
    const double x = f.X(t_axis, start), w = std::max(1.0, f.X(t_axis, end) - x);  // an instant stays visible
    const double y = f.top + kRowGap + static_cast<double>(lane_row[span.lane]) * (kRowHeight + kRowGap);
    const Colour& colour = kPalette[slot[span.kind]];
    const std::string what = span.label.empty() ? span.kind : span.label + " (" + span.kind + ")";
    body += "<g><title>" +
            Escape(what + ": " + Short(start) + " to " + Short(end) + " " + plot.unit + ", " + Short(end - start) +
                   " " + plot.unit) +
            "</title><rect x=\"" + Num(x) + "\" y=\"" + Num(y) + "\" width=\"" + Num(w) + "\" height=\"" +
            Num(kRowHeight) + "\" fill=\"" + colour.fill + "\"/>";
    if (!span.label.empty() && TextWidth(span.label) + 6 <= w) {
      body += "<text x=\"" + Num(x + w / 2) + "\" y=\"" + Num(y + kRowHeight / 2 + 4) +
              "\" text-anchor=\"middle\" fill=\"" + colour.text + "\">" + Escape(span.label) + "</text>";
    }
    body += "</g>\n";
  }
  return SvgOpen(f.bottom() + kBottomMargin, plot.title) + body + "</svg>\n";
}

namespace {

// Escapes `text`, turning `code` spans into <code>; an unpaired backtick stays as is.
std::string InlineHtml(const std::string& text) {
  std::string out;
  std::size_t i = 0;
  for (;;) {
    const std::size_t open = text.find('`', i);
    const std::size_t close = open == std::string::npos ? open : text.find('`', open + 1);
    if (close == std::string::npos) break;
    out += Escape(text.substr(i, open - i)) + "<code>" + Escape(text.substr(open + 1, close - open - 1)) + "</code>";
    i = close + 1;
  }
  return out + Escape(text.substr(i));
}

constexpr const char* kStyle = R"(body{font:16px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
body{color:#1f2328;max-width:820px;margin:2em auto;padding:0 1em}
h1,h2,h3,h4{line-height:1.25;margin:1.4em 0 .5em}
h1{font-size:1.8em;border-bottom:1px solid #d0d7de;padding-bottom:.2em}
code,pre{font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;font-size:.88em}
code{background:#eff1f3;padding:.1em .3em;border-radius:3px}
pre{background:#f6f8fa;border:1px solid #d0d7de;border-radius:4px;padding:.7em 1em;overflow-x:auto;line-height:1.4}
pre{white-space:pre-wrap;overflow-wrap:anywhere;font-size:.75em}
table{border-collapse:collapse;margin:1em 0;font-size:.94em}
th,td{border:1px solid #d0d7de;padding:.3em .7em;text-align:left}
th{background:#f6f8fa}
.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1.2em 0}
svg.dtlab-plot{max-width:100%;height:auto;display:block}
.verdict{margin:.4em 0;padding:.3em .7em;border-left:4px solid}
.verdict.ok{color:#1a7f37;border-color:#1a7f37;background:#eefbf1}
.verdict.bad{color:#cf222e;border-color:#cf222e;background:#fff0f0}
.verdict.pitfall{color:#9a6700;border-color:#bf8700;background:#fff8c5}
)";

// Lets a headless browser check that the page really laid out its plots: counts the
// plots with a non-zero size (and those without) into data attributes of <body>. It
// runs at once (getBoundingClientRect forces layout) and again after load, so the
// attributes are there whenever the DOM is read.
constexpr const char* kScript = R"(<script>
(function () {
  function measure() {
    var rendered = 0, empty = 0;
    document.querySelectorAll('svg.dtlab-plot').forEach(function (svg) {
      var box = svg.getBoundingClientRect();
      if (box.width > 0 && box.height > 0) rendered++; else empty++;
    });
    document.body.setAttribute('data-plots-rendered', String(rendered));
    document.body.setAttribute('data-plots-empty', String(empty));
    document.body.setAttribute('data-page-width', String(document.documentElement.scrollWidth));
  }
  measure();
  window.addEventListener('load', measure);
})();
</script>
)";

}  // namespace

HtmlDocument::HtmlDocument(std::string title) : title_(std::move(title)) {}

void HtmlDocument::AddHeading(int level, const std::string& text) {
  const std::string tag = "h" + std::to_string(std::clamp(level, 1, 4));
  blocks_.push_back("<" + tag + ">" + InlineHtml(text) + "</" + tag + ">\n");
}

void HtmlDocument::AddParagraph(const std::string& text) {
  std::string html, paragraph;
  auto flush = [&] {
    if (!paragraph.empty()) html += "<p>" + InlineHtml(paragraph) + "</p>\n";
    paragraph.clear();
  };
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      flush();  // a blank line ends a paragraph
    } else {
      paragraph += (paragraph.empty() ? "" : "\n") + line;
    }
    begin = end + 1;
  }
  flush();
  if (!html.empty()) blocks_.push_back(html);
}

void HtmlDocument::AddPreformatted(const std::string& text) { blocks_.push_back("<pre>" + Escape(text) + "</pre>\n"); }

void HtmlDocument::AddTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                            const std::vector<bool>& numeric_columns) {
  auto cell = [&](const char* tag, std::size_t column, const std::string& text) {
    const bool numeric = column < numeric_columns.size() && numeric_columns[column];
    return std::string("<") + tag + (numeric ? " class=\"num\">" : ">") + Escape(text) + "</" + tag + ">";
  };
  std::string html = "<table>\n<thead><tr>";
  for (std::size_t c = 0; c < header.size(); ++c) html += cell("th", c, header[c]);
  html += "</tr></thead>\n<tbody>\n";
  for (const auto& row : rows) {
    html += "<tr>";
    for (std::size_t c = 0; c < std::max(row.size(), header.size()); ++c) {
      html += cell("td", c, c < row.size() ? row[c] : "");  // short rows are padded
    }
    html += "</tr>\n";
  }
  blocks_.push_back(html + "</tbody>\n</table>\n");
}

void HtmlDocument::AddPlot(const LinePlot& plot) { blocks_.push_back("<figure>\n" + RenderSvg(plot) + "</figure>\n"); }
void HtmlDocument::AddPlot(const BarPlot& plot) { blocks_.push_back("<figure>\n" + RenderSvg(plot) + "</figure>\n"); }
void HtmlDocument::AddPlot(const TimelinePlot& plot) {
  blocks_.push_back("<figure>\n" + RenderSvg(plot) + "</figure>\n");
}

void HtmlDocument::AddSvg(const std::string& svg) { blocks_.push_back("<figure>\n" + svg + "</figure>\n"); }

void HtmlDocument::AddLinks(const std::vector<Link>& links) {
  std::string html = "<ul class=\"links\">\n";
  for (const Link& link : links) {
    html += "<li><a href=\"" + Escape(link.href) + "\">" + Escape(link.text) + "</a>";
    if (!link.note.empty()) html += ": " + InlineHtml(link.note);
    html += "</li>\n";
  }
  blocks_.push_back(html + "</ul>\n");
}

void HtmlDocument::AddVerdict(const std::string& outcome, VerdictLook look, const std::string& text) {
  // A mark besides the colour, for readers who cannot tell green from red.
  const char* opening = look == VerdictLook::kAsExpected ? "ok\">\xE2\x9C\x93 "
                        : look == VerdictLook::kPitfall  ? "pitfall\">\xE2\x9A\xA0 "
                                                         : "bad\">\xE2\x9C\x97 ";
  blocks_.push_back(std::string("<p class=\"verdict ") + opening + "<strong>" + Escape(outcome) + "</strong> " +
                    InlineHtml(text) + "</p>\n");
}

std::string HtmlDocument::Render() const {
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + Escape(title_) +
                     "</title>\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<style>\n" +
                     kStyle + "</style>\n</head>\n<body>\n";
  for (const std::string& block : blocks_) html += block;
  return html + kScript + "</body>\n</html>\n";
}

}  // namespace dtlab::report
