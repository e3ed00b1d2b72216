#include "scenarios/html_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace dtlab::report {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// No number in the output may be NaN or infinite (they would break the SVG silently).
void ExpectFiniteNumbers(const std::string& svg) {
  EXPECT_EQ(svg.find("nan"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("NaN"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("inf"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("-0.00\""), std::string::npos) << svg;
}

// One tag of the SVG: its name ("text", "/text", "rect"...), its attributes and the
// character data after it. A flat scan is enough here: the renderer escapes '<' and
// '"' in text, and no std::regex (whose GCC 12 headers warn under the asan preset).
struct Element {
  std::string tag;
  std::map<std::string, std::string> attrs;
  std::string text;
  double Attr(const std::string& name) const { return std::stod(attrs.at(name)); }
};

std::vector<Element> Parse(const std::string& svg) {
  std::vector<Element> elements;
  for (std::size_t open = svg.find('<'); open != std::string::npos;) {
    const std::size_t close = svg.find('>', open);
    std::string inside = svg.substr(open + 1, close - open - 1);
    if (!inside.empty() && inside.back() == '/') inside.pop_back();
    Element e;
    std::size_t at = inside.find(' ');
    e.tag = inside.substr(0, at);
    while (at != std::string::npos) {
      const std::size_t eq = inside.find("=\"", at);
      if (eq == std::string::npos) break;
      const std::size_t end = inside.find('"', eq + 2);
      e.attrs[inside.substr(at + 1, eq - at - 1)] = inside.substr(eq + 2, end - eq - 2);
      at = end + 1;
    }
    const std::size_t next = svg.find('<', close);
    e.text = svg.substr(close + 1, (next == std::string::npos ? svg.size() : next) - close - 1);
    elements.push_back(e);
    open = next;
  }
  return elements;
}

std::vector<Element> All(const std::string& svg, const std::string& tag) {
  std::vector<Element> found;
  for (const Element& e : Parse(svg)) {
    if (e.tag == tag) found.push_back(e);
  }
  return found;
}

// The text of every <text> element, in order.
std::vector<std::string> Texts(const std::string& svg) {
  std::vector<std::string> texts;
  for (const Element& e : All(svg, "text")) texts.push_back(e.text);
  return texts;
}

// The element just after the <title> whose text starts with `title` (a rect of a
// timeline span), or just before it (a bar: <rect ...><title>).
Element Titled(const std::string& svg, const std::string& title, int offset) {
  const std::vector<Element> elements = Parse(svg);
  for (std::size_t i = 1; i + 1 < elements.size(); ++i) {
    if (elements[i].tag == "title" && elements[i].text.rfind(title, 0) == 0) {
      return elements[static_cast<std::size_t>(static_cast<int>(i) + offset)];
    }
  }
  ADD_FAILURE() << "no <title> " << title << " in " << svg;
  return {};
}

// The coordinates of a path's "M x y L x y ..." data, in order.
std::vector<double> PathNumbers(const std::string& d) {
  std::vector<double> numbers;
  for (std::size_t i = 0; i < d.size();) {
    if (d[i] == ' ' || d[i] == 'M' || d[i] == 'L') {
      ++i;
      continue;
    }
    std::size_t used = 0;
    numbers.push_back(std::stod(d.substr(i), &used));
    i += used;
  }
  return numbers;
}

bool HasText(const std::string& svg, const std::string& text) {
  for (const std::string& t : Texts(svg)) {
    if (t == text) return true;
  }
  return false;
}

LinePlot Loss() {
  LinePlot plot{"Loss", "step", "loss", {}, false};
  Series a{"replica 0", {0, 1, 2, 3, 4}, {2.0, 1.5, 1.1, 0.9, 0.8}};
  Series b{"replica 1", {0, 1, 2, 3, 4}, {2.1, 1.4, 1.2, 0.8, 0.7}};
  plot.series = {a, b};
  return plot;
}

TEST(HtmlReport, SvgHasSizeNamespaceAndClass) {
  const std::string svg = RenderSvg(Loss());
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"dtlab-plot\" width=\"640\"", 0), 0u) << svg;
  const Element root = Parse(svg).front();
  EXPECT_EQ(root.attrs.at("viewBox"), "0 0 640 " + root.attrs.at("height"));
  EXPECT_GE(root.Attr("height"), 280);
  EXPECT_LE(root.Attr("height"), 400);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
}

TEST(HtmlReport, LinePlotHasOnePathPerSeriesWithTitlesLabelsAndLegend) {
  const std::string svg = RenderSvg(Loss());
  EXPECT_EQ(Count(svg, "<path "), 2);
  EXPECT_NE(svg.find("<title>replica 0</title></path>"), std::string::npos);
  EXPECT_NE(svg.find("<title>replica 1</title></path>"), std::string::npos);
  EXPECT_TRUE(HasText(svg, "Loss"));
  EXPECT_TRUE(HasText(svg, "step"));
  EXPECT_TRUE(HasText(svg, "loss"));
  EXPECT_TRUE(HasText(svg, "replica 0"));  // legend
  EXPECT_TRUE(HasText(svg, "replica 1"));
  // Distinct colours: the two paths use different strokes.
  const std::vector<Element> paths = All(svg, "path");
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_EQ(paths[0].attrs.at("stroke").front(), '#');
  EXPECT_NE(paths[0].attrs.at("stroke"), paths[1].attrs.at("stroke"));
  ExpectFiniteNumbers(svg);
}

// The labels of the y ticks (right-aligned) or the x ticks (centred below the frame).
std::vector<std::string> TickLabels(const std::string& svg, bool y) {
  const std::vector<Element> elements = Parse(svg);
  std::vector<std::string> labels;
  for (std::size_t i = 1; i < elements.size(); ++i) {
    const Element &e = elements[i], &before = elements[i - 1];
    if (e.tag != "text") continue;
    const bool x_tick = before.tag == "line" && before.attrs.at("x1") == before.attrs.at("x2") &&
                        before.Attr("y2") - before.Attr("y1") == 4;  // a tick mark below the frame
    if (y ? e.attrs.at("text-anchor") == "end" : x_tick) labels.push_back(e.text);
  }
  return labels;
}

TEST(HtmlReport, NiceTicks) {
  // y from 0.7 to 2.1: steps of 0.2 (a 1/2/5 x 10^k grid), widened to whole steps.
  const std::string svg = RenderSvg(Loss());
  EXPECT_EQ(TickLabels(svg, true),
            (std::vector<std::string>{"0.6", "0.8", "1", "1.2", "1.4", "1.6", "1.8", "2", "2.2"}));
  // x from 0 to 4 in whole steps: whole ticks only (never "step 1.5").
  EXPECT_EQ(TickLabels(svg, false), (std::vector<std::string>{"0", "1", "2", "3", "4"}));
  // x with fractions from 0 to 4: about 8 ticks.
  LinePlot fractional{"t", "x", "y", {{"s", {0, 0.5, 4}, {1, 2, 3}}}, false};
  EXPECT_EQ(TickLabels(RenderSvg(fractional), false),
            (std::vector<std::string>{"0", "0.5", "1", "1.5", "2", "2.5", "3", "3.5", "4"}));
  // Floating-point noise never shows: the tick at 0 reads "0", not "5.55112e-17".
  LinePlot tenths{"t", "x", "y", {{"s", {0, 1}, {-0.3, 0.7}}}, false};
  const std::vector<std::string> labels = TickLabels(RenderSvg(tenths), true);
  EXPECT_EQ(labels, (std::vector<std::string>{"-0.4", "-0.2", "0", "0.2", "0.4", "0.6", "0.8"}));
  // Large steps: 5 x 10^k.
  LinePlot big{"t", "x", "y", {{"s", {0, 1}, {0, 23000}}}, false};
  EXPECT_EQ(TickLabels(RenderSvg(big), true),
            (std::vector<std::string>{"0", "5000", "10000", "15000", "20000", "25000"}));
}

TEST(HtmlReport, RenderingIsDeterministic) {
  EXPECT_EQ(RenderSvg(Loss()), RenderSvg(Loss()));
  HtmlDocument a("t"), b("t");
  for (HtmlDocument* d : {&a, &b}) {
    d->AddPlot(Loss());
    d->AddParagraph("x");
  }
  EXPECT_EQ(a.Render(), b.Render());
  // Coordinates have exactly 2 decimals.
  const std::string svg = RenderSvg(Loss());
  const std::string d = All(svg, "path").at(0).attrs.at("d");
  const std::string x = d.substr(1, d.find(' ') - 1);
  EXPECT_EQ(x.size() - x.find('.'), 3u) << d;
}

TEST(HtmlReport, NonFiniteValuesBreakTheLine) {
  LinePlot plot{"gaps", "step", "loss", {{"s", {0, 1, 2, 3, 4, 5}, {1, 2, kNaN, 3, 4, kInf}}}, false};
  const std::string svg = RenderSvg(plot);
  ExpectFiniteNumbers(svg);
  // Two runs in one path: M.. L.. M.. L..
  const std::vector<Element> paths = All(svg, "path");
  ASSERT_EQ(paths.size(), 1u);
  const std::string d = paths[0].attrs.at("d");
  EXPECT_EQ(Count(d, "M"), 2) << d;
  EXPECT_EQ(Count(d, "L"), 2) << d;
  // The axis does not stretch to infinity: the top tick is a small number.
  EXPECT_TRUE(HasText(svg, "4")) << svg;
}

TEST(HtmlReport, LonePointsAndEqualValues) {
  LinePlot one{"one", "x", "y", {{"s", {3}, {5}}}, false};
  const std::string svg = RenderSvg(one);
  ExpectFiniteNumbers(svg);
  EXPECT_EQ(Count(svg, "<circle "), 1);  // a lone point has no line but is shown
  EXPECT_NE(svg.find("<title>s</title></circle>"), std::string::npos);
  EXPECT_EQ(svg.find("<path "), std::string::npos);

  LinePlot flat{"flat", "x", "y", {{"s", {0, 1, 2}, {7, 7, 7}}}, false};
  const std::string flat_svg = RenderSvg(flat);
  ExpectFiniteNumbers(flat_svg);
  EXPECT_EQ(Count(flat_svg, "<path "), 1);
  // 7 lies strictly inside the y range: ticks below and above it.
  EXPECT_TRUE(HasText(flat_svg, "7")) << flat_svg;

  LinePlot zeros{"zeros", "x", "y", {{"s", {0, 0}, {0, 0}}}, false};
  ExpectFiniteNumbers(RenderSvg(zeros));
}

TEST(HtmlReport, EmptyPlotsDrawAxesAndSayNoData) {
  for (const LinePlot& plot :
       {LinePlot{"empty", "x", "y", {}, false}, LinePlot{"all missing", "x", "y", {{"s", {0, 1}, {kNaN, kNaN}}}, false},
        LinePlot{"log of <= 0", "x", "y", {{"s", {0, 1}, {0, -1}}}, true}}) {
    const std::string svg = RenderSvg(plot);
    ExpectFiniteNumbers(svg);
    EXPECT_TRUE(HasText(svg, "no data")) << plot.title;
    EXPECT_GE(Count(svg, "<line "), 2) << plot.title;  // the axes
    EXPECT_EQ(svg.find("<path "), std::string::npos);
  }
  EXPECT_FALSE(HasText(RenderSvg(Loss()), "no data"));
  const std::string bars = RenderSvg(BarPlot{"b", "x", "y", {}, {}});
  ExpectFiniteNumbers(bars);
  EXPECT_TRUE(HasText(bars, "no data"));
  const std::string timeline = RenderSvg(TimelinePlot{"t", "ms", {}});
  ExpectFiniteNumbers(timeline);
  EXPECT_TRUE(HasText(timeline, "no data"));
}

TEST(HtmlReport, LogScaleUsesDecadesAndSkipsNonPositive) {
  LinePlot plot{"log", "step", "loss", {{"s", {0, 1, 2, 3, 4}, {100, 10, 0, 0.5, 0.01}}}, true};
  const std::string svg = RenderSvg(plot);
  ExpectFiniteNumbers(svg);
  for (const char* t : {"0.01", "0.1", "1", "10", "100"}) EXPECT_TRUE(HasText(svg, t)) << t << svg;
  EXPECT_FALSE(HasText(svg, "50"));
  const std::string d = All(svg, "path").at(0).attrs.at("d");
  EXPECT_EQ(Count(d, "M"), 2) << "0 breaks the line on a log scale: " << d;
  // Equal spacing: 100 -> 10 and 10 -> 1 are one decade each.
  plot.series[0].y = {100, 10, 1, 0.1, 0.01};
  const std::string even = RenderSvg(plot);
  const std::vector<double> xy = PathNumbers(All(even, "path").at(0).attrs.at("d"));
  ASSERT_EQ(xy.size(), 10u);
  EXPECT_NEAR(xy[3] - xy[1], xy[5] - xy[3], 0.011);
  EXPECT_GT(xy[3], xy[1]);
  // All values equal to a power of ten: still a decade to show.
  LinePlot flat{"flat", "x", "y", {{"s", {0, 1}, {10, 10}}}, true};
  EXPECT_EQ(TickLabels(RenderSvg(flat), true), (std::vector<std::string>{"10", "100"}));
}

TEST(HtmlReport, TextIsEscaped) {
  LinePlot plot{"a<b & \"c\" 'd'", "x<", "y>", {{"<script>", {0, 1}, {0, 1}}}, false};
  const std::string svg = RenderSvg(plot);
  EXPECT_EQ(svg.find("<script>"), std::string::npos);
  EXPECT_EQ(svg.find("a<b"), std::string::npos);
  EXPECT_NE(svg.find("a&lt;b &amp; &quot;c&quot; &#39;d&#39;"), std::string::npos);
  EXPECT_NE(svg.find("<title>&lt;script&gt;</title>"), std::string::npos);

  HtmlDocument doc("<T&>");
  doc.AddHeading(2, "<h>");
  doc.AddParagraph("1 < 2 & `a<b`");
  doc.AddPreformatted("<pre>&");
  doc.AddTable({"<th>"}, {{"<td>"}});
  doc.AddVerdict("<PASS>", true, "x > y");
  doc.AddHeading(0, "low");
  doc.AddHeading(9, "high");
  const std::string html = doc.Render();
  EXPECT_NE(html.find("<h1>low</h1>"), std::string::npos);
  EXPECT_NE(html.find("<h4>high</h4>"), std::string::npos);
  EXPECT_NE(html.find("<title>&lt;T&amp;&gt;</title>"), std::string::npos);
  EXPECT_NE(html.find("<h2>&lt;h&gt;</h2>"), std::string::npos);
  EXPECT_NE(html.find("<p>1 &lt; 2 &amp; <code>a&lt;b</code></p>"), std::string::npos) << html;
  EXPECT_NE(html.find("<pre>&lt;pre&gt;&amp;</pre>"), std::string::npos);
  EXPECT_NE(html.find("<th>&lt;th&gt;</th>"), std::string::npos);
  EXPECT_NE(html.find("<td>&lt;td&gt;</td>"), std::string::npos);
  EXPECT_NE(html.find("<strong>&lt;PASS&gt;</strong> x &gt; y"), std::string::npos);
}

TEST(HtmlReport, BarPlotGroupsBarsWithValues) {
  BarPlot plot{
      "Batch", "replica", "examples", {"r0", "r1", "r2"}, {{"step 1", {}, {16, 16, 16}}, {"last", {}, {16, 12, 0}}}};
  const std::string svg = RenderSvg(plot);
  ExpectFiniteNumbers(svg);
  EXPECT_EQ(Count(svg, "<title>"), 6);
  EXPECT_NE(svg.find("<title>last, r1: 12</title></rect>"), std::string::npos);
  for (const char* t : {"r0", "r1", "r2", "step 1", "last", "0", "Batch", "replica", "examples"}) {
    EXPECT_TRUE(HasText(svg, t)) << t;
  }
  // Bars grow from 0; a bar of 16 is 4/3 as tall as one of 12.
  EXPECT_NEAR(Titled(svg, "last, r0: 16", -1).Attr("height") / Titled(svg, "last, r1: 12", -1).Attr("height"),
              16.0 / 12.0, 0.01);
  // Also when no value is 0.
  BarPlot positive{"p", "x", "y", {"a", "b"}, {{"s", {}, {10, 20}}}};
  const std::string pos = RenderSvg(positive);
  EXPECT_NEAR(Titled(pos, "s, b: 20", -1).Attr("height") / Titled(pos, "s, a: 10", -1).Attr("height"), 2.0, 0.01);
  EXPECT_EQ(TickLabels(pos, true).front(), "0");

  // Negative values: the axis reaches below 0, bars hang from the zero line.
  BarPlot negative{"d", "x", "y", {"a", "b"}, {{"s", {}, {-3, 5}}}};
  const std::string neg = RenderSvg(negative);
  ExpectFiniteNumbers(neg);
  EXPECT_TRUE(HasText(neg, "-4") || HasText(neg, "-5")) << neg;
  EXPECT_TRUE(HasText(neg, "0"));
  const Element down = Titled(neg, "s, a: -3", -1), up = Titled(neg, "s, b: 5", -1);
  EXPECT_NEAR(down.Attr("y"), up.Attr("y") + up.Attr("height"), 0.011);  // both touch the zero line
  EXPECT_NEAR(down.Attr("height") / up.Attr("height"), 3.0 / 5.0, 0.01);
}

TEST(HtmlReport, TimelineLanesInFirstAppearanceOrderAndKindColoursStable) {
  TimelinePlot plot{"Step", "ms", {}};
  plot.spans = {{"replica 1", "fwd", "compute", 0, 4},
                {"replica 0", "fwd", "compute", 0, 3},
                {"replica 1", "all-reduce of the gradients", "all-reduce", 4, 4.2},
                {"replica 0", "wait", "idle", 3, 4}};
  const std::string svg = RenderSvg(plot);
  ExpectFiniteNumbers(svg);
  const std::vector<std::string> texts = Texts(svg);
  const auto at = [&](const std::string& t) { return std::find(texts.begin(), texts.end(), t) - texts.begin(); };
  ASSERT_LT(at("replica 1"), static_cast<long>(texts.size()));
  EXPECT_LT(at("replica 1"), at("replica 0"));
  EXPECT_TRUE(HasText(svg, "time (ms)"));
  EXPECT_TRUE(HasText(svg, "fwd"));  // fits inside its bar
  EXPECT_FALSE(HasText(svg, "all-reduce of the gradients")) << "too long for a 0.2 ms bar";
  EXPECT_NE(svg.find("<title>all-reduce of the gradients (all-reduce): 4 to 4.2 ms"), std::string::npos) << svg;
  for (const char* kind : {"compute", "all-reduce", "idle"}) EXPECT_TRUE(HasText(svg, kind)) << kind;  // legend

  // A kind keeps its colour whatever else the timeline holds.
  const auto fill_of = [](const std::string& s, const std::string& label) {
    const Element rect = Titled(s, label, 2);  // <title>, </title>, <rect>
    return rect.tag == "rect" ? rect.attrs.at("fill") : std::string();
  };
  const std::string compute = fill_of(svg, "fwd");
  EXPECT_FALSE(compute.empty());
  EXPECT_NE(compute, fill_of(svg, "wait"));
  EXPECT_NE(compute, fill_of(svg, "all-reduce of"));
  const std::string alone = RenderSvg(TimelinePlot{"x", "s", {{"lane", "fwd", "compute", 0, 1}}});
  EXPECT_EQ(fill_of(alone, "fwd"), compute);
  EXPECT_TRUE(HasText(alone, "time (s)"));
  // "recv" and "all-reduce" hash to the same colour: the tie is broken by name, not
  // by which comes first, and the two still differ.
  const std::string both =
      RenderSvg(TimelinePlot{"x", "ms", {{"a", "r", "recv", 0, 1}, {"a", "ar", "all-reduce", 1, 2}}});
  const std::string reversed =
      RenderSvg(TimelinePlot{"x", "ms", {{"a", "ar", "all-reduce", 1, 2}, {"a", "r", "recv", 0, 1}}});
  EXPECT_EQ(fill_of(both, "ar"), fill_of(reversed, "ar"));
  EXPECT_EQ(fill_of(both, "r "), fill_of(reversed, "r "));
  EXPECT_NE(fill_of(both, "ar"), fill_of(both, "r "));
}

TEST(HtmlReport, DocumentStructureAndNoExternalResources) {
  HtmlDocument doc("Scenario report");
  doc.AddHeading(1, "Report");
  doc.AddParagraph("First paragraph,\nstill first.\n\n  \nSecond with `code`.");
  doc.AddTable({"name", "value"}, {{"a", "1.5"}, {"b"}}, {false, true});
  doc.AddPlot(Loss());
  doc.AddPlot(BarPlot{"b", "x", "y", {"c"}, {{"s", {}, {1}}}});
  doc.AddPlot(TimelinePlot{"t", "ms", {{"l", "x", "k", 0, 1}}});
  doc.AddVerdict("PASS", true, "fine");
  doc.AddVerdict("FAIL", false, "broken");
  const std::string html = doc.Render();

  EXPECT_EQ(html.rfind("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                       "<title>Scenario report</title>",
                       0),
            0u);
  EXPECT_NE(html.find("<style>"), std::string::npos);
  EXPECT_EQ(html.substr(html.size() - 8), "</html>\n");
  // Blocks in order.
  const std::size_t h1 = html.find("<h1>Report</h1>"), p1 = html.find("<p>First paragraph,\nstill first.</p>"),
                    p2 = html.find("<p>Second with <code>code</code>.</p>"), table = html.find("<table>"),
                    svg = html.find("<svg"), pass = html.find("<strong>PASS</strong> fine"),
                    fail = html.find("<strong>FAIL</strong> broken");
  ASSERT_NE(h1, std::string::npos);
  ASSERT_NE(p1, std::string::npos);
  ASSERT_NE(p2, std::string::npos);
  EXPECT_LT(h1, p1);
  EXPECT_LT(p1, p2);
  EXPECT_LT(p2, table);
  EXPECT_LT(table, svg);
  EXPECT_LT(svg, pass);
  EXPECT_LT(pass, fail);
  EXPECT_EQ(Count(html, "<p>"), 2);
  EXPECT_EQ(Count(html, "class=\"dtlab-plot\""), 3);
  // Numeric columns right-aligned; short rows padded.
  EXPECT_NE(html.find("<tr><td>a</td><td class=\"num\">1.5</td></tr>"), std::string::npos) << html;
  EXPECT_NE(html.find("<tr><td>b</td><td class=\"num\"></td></tr>"), std::string::npos);
  EXPECT_NE(html.find("<th class=\"num\">value</th>"), std::string::npos);
  EXPECT_NE(html.find(".num{text-align:right"), std::string::npos);
  // Verdicts coloured by outcome.
  EXPECT_NE(html.find("class=\"verdict ok\">"), std::string::npos);
  EXPECT_NE(html.find("class=\"verdict bad\">"), std::string::npos);
  EXPECT_LT(html.find("class=\"verdict ok\">"), pass);
  EXPECT_LT(html.find("class=\"verdict bad\">"), fail);
  EXPECT_GT(html.find("class=\"verdict bad\">"), pass);

  // Nothing is fetched: the only URL is the SVG namespace.
  EXPECT_EQ(Count(html, "http://"), Count(html, "http://www.w3.org/2000/svg"));
  EXPECT_EQ(Count(html, "http://www.w3.org/2000/svg"), 3);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
}

TEST(HtmlReport, AddSvgInsertsARenderedPlotAsIs) {
  HtmlDocument direct("t"), raw("t");
  direct.AddPlot(Loss());
  raw.AddSvg(RenderSvg(Loss()));
  EXPECT_EQ(direct.Render(), raw.Render());
  EXPECT_EQ(Count(raw.Render(), "<svg "), 1);
}

TEST(HtmlReport, ScriptReportsRenderedPlots) {
  HtmlDocument doc("t");
  doc.AddPlot(Loss());
  const std::string html = doc.Render();
  const std::size_t script = html.find("<script>");
  ASSERT_NE(script, std::string::npos);
  EXPECT_LT(script, html.find("</body>"));
  EXPECT_EQ(Count(html, "<script"), 1);
  EXPECT_NE(html.find("querySelectorAll('svg.dtlab-plot')"), std::string::npos);
  EXPECT_NE(html.find("getBoundingClientRect()"), std::string::npos);
  EXPECT_NE(html.find("setAttribute('data-plots-rendered'"), std::string::npos);
  EXPECT_NE(html.find("setAttribute('data-plots-empty'"), std::string::npos);
  EXPECT_NE(html.find("addEventListener('load'"), std::string::npos);
  EXPECT_NE(html.find("  measure();\n"), std::string::npos) << "also measured at once, before load";
  // The attributes come from the browser only, never from the page text.
  EXPECT_EQ(html.find("data-plots-rendered=\""), std::string::npos);
  EXPECT_NE(html.find("<body>\n"), std::string::npos);
}

TEST(HtmlReport, ManySeriesWrapTheLegendAndReuseColours) {
  LinePlot plot{"many", "x", "y", {}, false};
  for (int k = 0; k < 10; ++k) {
    plot.series.push_back({"series number " + std::to_string(k), {0, 1}, {0.0 + k, 1.0 + k}});
  }
  const std::string svg = RenderSvg(plot);
  ExpectFiniteNumbers(svg);
  EXPECT_EQ(Count(svg, "<path "), 10);
  // The legend takes more rows, so the figure is taller than with two series.
  EXPECT_GT(Parse(svg).front().Attr("height"), Parse(RenderSvg(Loss())).front().Attr("height"));
}

TEST(HtmlReport, HugeAndMismatchedInputsStayFinite) {
  LinePlot huge{"h", "x", "y", {{"s", {0, 1, 2}, {-1e300, 1e300, 5}}}, false};
  ExpectFiniteNumbers(RenderSvg(huge));
  LinePlot mismatched{"m", "x", "y", {{"s", {0, 1, 2}, {1}}}, false};  // x longer than y
  ExpectFiniteNumbers(RenderSvg(mismatched));
  BarPlot short_series{"b", "x", "y", {"a", "b", "c"}, {{"s", {}, {1}}}};
  const std::string bars = RenderSvg(short_series);
  ExpectFiniteNumbers(bars);
  EXPECT_EQ(Count(bars, "<title>"), 1);
  TimelinePlot odd{"t", "ms", {{"l", "backwards", "k", 5, 2}, {"l", "nan", "k", kNaN, 1}, {"l", "instant", "k", 3, 3}}};
  const std::string timeline = RenderSvg(odd);
  ExpectFiniteNumbers(timeline);
  EXPECT_NE(timeline.find("<title>backwards (k): 2 to 5 ms"), std::string::npos);
  EXPECT_EQ(timeline.find("<title>nan"), std::string::npos);
  EXPECT_NE(timeline.find("<title>instant (k): 3 to 3 ms"), std::string::npos);
}

// Equal series stay visible: distinct dashes, the earlier drawn wider beneath,
// and a note under the legend (the gradient-norm plot: distributed = reference).
TEST(HtmlReport, OverlappingSeriesStayVisible) {
  LinePlot plot{"norms", "step", "|g|", {}, false};
  plot.series = {{"main distributed", {1, 2, 3}, {1, 2, 3}},
                 {"main reference", {1, 2, 3}, {1, 2, 3}},
                 {"other", {1, 2, 3}, {3, 2, 1}}};
  const std::string svg = RenderSvg(plot);
  const std::vector<Element> paths = All(svg, "path");
  ASSERT_EQ(paths.size(), 3u);
  EXPECT_GT(paths[0].Attr("stroke-width"), paths[1].Attr("stroke-width"));
  EXPECT_EQ(paths[1].Attr("stroke-width"), paths[2].Attr("stroke-width"));
  EXPECT_EQ(paths[0].attrs.count("stroke-dasharray"), 0u);
  EXPECT_NE(paths[1].attrs.at("stroke-dasharray"), paths[2].attrs.at("stroke-dasharray"));
  EXPECT_TRUE(HasText(svg, "Lines overlap (wider beneath): main distributed = main reference")) << svg;
  // Without equal series there is no note.
  plot.series.pop_back(), plot.series.back().y = {2, 3, 4};
  EXPECT_EQ(RenderSvg(plot).find("Lines overlap"), std::string::npos);
}

// PASS, FAIL and a failure the scenario expects (the pitfall) look different.
TEST(HtmlReport, ExpectedFailureHasItsOwnClass) {
  HtmlDocument doc("t");
  doc.AddVerdict("PASS", true, "fine");
  doc.AddVerdict("FAIL", false, "broken");
  doc.AddVerdict("FAIL", VerdictLook::kPitfall, "the pitfall");
  const std::string html = doc.Render();
  EXPECT_NE(html.find("<p class=\"verdict ok\">"), std::string::npos);
  EXPECT_NE(html.find("<p class=\"verdict bad\">"), std::string::npos);
  EXPECT_NE(html.find("<p class=\"verdict pitfall\">"), std::string::npos);
}

}  // namespace
}  // namespace dtlab::report
