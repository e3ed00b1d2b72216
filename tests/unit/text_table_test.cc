// Tables that fit a terminal (scenarios/text_table.h), the terminal's width and
// colour (cli/terminal.h), and the values a lesson shows (lessons/lesson_values.h).
#include "scenarios/text_table.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <sstream>

#include "cli/terminal.h"
#include "lessons/lesson_values.h"

namespace dtlab {
namespace {

TextTable Runs() {
  TextTable table;
  table.columns = {{"run", "", 0, false},
                   {"cluster", "", 0, true},
                   {"global batch", "batch", 2, false},
                   {"split", "", 1, false},
                   {"reference", "", 0, true}};
  table.rows = {{"main", "mirrored 4 ring", "256", "legacy", "FAIL 4/4 steps"},
                {"fixed", "mirrored 4 ring", "256", "legacy", "PASS"}};
  table.tones = {{Tone::kPlain, Tone::kPlain, Tone::kPlain, Tone::kPlain, Tone::kPitfall},
                 {Tone::kPlain, Tone::kPlain, Tone::kPlain, Tone::kPlain, Tone::kPass}};
  return table;
}

std::size_t Widest(const std::string& text) {
  std::size_t widest = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) widest = std::max(widest, VisibleWidth(line));
  return widest;
}

// Every word `text` shows is a whole word of a cell or a header (a column left out
// is named in the note, which is not checked): nothing was broken inside a word.
void ExpectWordsWhole(const TextTable& table, const std::string& text) {
  std::set<std::string> words;
  const auto add = [&](const std::string& cell) {
    std::istringstream in(cell);
    for (std::string word; in >> word;) words.insert(word), words.insert(word + ":");
  };
  for (const auto& column : table.columns) add(column.header), add(column.short_header);
  for (const auto& row : table.rows)
    for (const auto& cell : row) add(cell);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("(left out") != std::string::npos || line.find(")") == line.size() - 1) continue;
    std::istringstream in(line);
    for (std::string word; in >> word;) EXPECT_TRUE(words.count(word)) << "'" << word << "' in\n" << text;
  }
}

TEST(FitTable, WidthZeroIsTheTableAsItAlwaysWas) {
  const std::string text = RenderTable(Runs(), 0, false);
  EXPECT_EQ(text,
            "  run    cluster          global batch  split   reference\n"
            "  main   mirrored 4 ring  256           legacy  FAIL 4/4 steps\n"
            "  fixed  mirrored 4 ring  256           legacy  PASS\n");
  EXPECT_EQ(RenderTable(Runs(), 200, false), text);  // fits: the same
}

TEST(FitTable, ShortHeadersThenColumnsLeftOutInRankOrder) {
  const std::string short_headers = RenderTable(Runs(), 58, false);
  EXPECT_NE(short_headers.find("  run    cluster          batch  split   reference\n"), std::string::npos)
      << short_headers;
  const std::string dropped = RenderTable(Runs(), 50, false);
  EXPECT_EQ(dropped.substr(0, dropped.find('\n')), "  run    cluster          batch  reference") << dropped;
  EXPECT_NE(dropped.find("(left out to fit 50 columns: split)"), std::string::npos) << dropped;
  EXPECT_LE(Widest(dropped), 50u);
}

TEST(FitTable, WrapsCellsAtSpacesThenStacks) {
  for (const int width : {40, 30, 24, 22}) {
    const TextTable table = Runs();
    const std::string text = RenderTable(table, width, false);
    EXPECT_LE(Widest(text), static_cast<std::size_t>(width)) << text;
    ExpectWordsWhole(table, text);
  }
  const FittedTable stacked = FitTable(Runs(), 22, false);
  ASSERT_TRUE(stacked.stacked);
  EXPECT_EQ(stacked.rows.front().substr(0, 12), "  run: main\n");
  EXPECT_NE(stacked.rows.front().find("    split: legacy\n"), std::string::npos);  // nothing left out
}

TEST(FitTable, ColoursCellsButMeasuresWithoutEscapes) {
  const std::string plain = RenderTable(Runs(), 0, false), colored = RenderTable(Runs(), 0, true);
  EXPECT_NE(colored.find("\033[33mFAIL 4/4 steps\033[0m"), std::string::npos);
  EXPECT_NE(colored.find("\033[32mPASS\033[0m"), std::string::npos);
  EXPECT_EQ(StripAnsi(colored), plain);
}

TEST(WrapLines, WrapsOnlyWideLinesAndNeverInsideAWord) {
  EXPECT_EQ(WrapLines("short\n  a bb ccc dddd\n", 10), "short\n  a bb ccc\n    dddd\n");
  EXPECT_EQ(WrapLines("no newline at the end", 12), "no newline\n  at the end");
  EXPECT_EQ(WrapLines("unchanged   spacing\n", 0), "unchanged   spacing\n");
  EXPECT_EQ(WrapLines("abcdefghijklmnop q\n", 8), "abcdefghijklmnop\n  q\n");
}

TEST(Paint, NothingWithoutColour) {
  EXPECT_EQ(Paint("FAIL", Tone::kFail, false), "FAIL");
  EXPECT_EQ(Paint("PASS", Tone::kPass, true), "\033[32mPASS\033[0m");
  EXPECT_EQ(Paint("x", Tone::kPlain, true), "x");
}

TEST(Terminal, ColumnsAndColourModes) {
  ::setenv("COLUMNS", "66", 1);
  EXPECT_EQ(cli::TerminalColumns(), 66);
  EXPECT_EQ(cli::FitWidth(), 66);  // COLUMNS fits even a file
  ::setenv("COLUMNS", "wide", 1);
  EXPECT_EQ(cli::TerminalColumns(), 80);  // not a number: the terminal's, or 80 here
  ::unsetenv("COLUMNS");
  EXPECT_EQ(cli::FitWidth(), 0);  // tests do not run on a terminal: no fitting
  EXPECT_EQ(*cli::ParseColorMode("never"), cli::ColorMode::kNever);
  EXPECT_FALSE(cli::ParseColorMode("sometimes").ok());
  EXPECT_TRUE(cli::UseColor(cli::ColorMode::kAlways));
  EXPECT_FALSE(cli::UseColor(cli::ColorMode::kNever));
  ::setenv("NO_COLOR", "1", 1);
  EXPECT_FALSE(cli::UseColor(cli::ColorMode::kAuto));
  EXPECT_TRUE(cli::UseColor(cli::ColorMode::kAlways));  // --color always wins over NO_COLOR
  ::unsetenv("NO_COLOR");
  EXPECT_EQ(cli::FitLine("Epoch 1/10  loss 2.3025  accuracy 12.89%", 24), "Epoch 1/10  loss 2.3025");
}

TEST(ValuesAbout, TheAnswerAcrossRunsAndTheQuotedValues) {
  auto lesson = ParseLesson(
      "---\ntitle: t\nsummary: s\n---\n"
      "```question\nask = \"how much?\"\nanswer = \"gradient_ratio\"\n```\n"
      "```run\nscenario = \"per-replica-mean\"\nshow = [\"values\"]\n```\n"
      "It was {{max_ulp}} ULP.\n",
      "t.md");
  ASSERT_TRUE(lesson.ok()) << lesson.status().message();
  const LessonValues values = {{"steps", 4},         {"gradient_ratio", 8},       {"max_ulp", 9},
                               {"fixed.steps", 4},   {"fixed.gradient_ratio", 1}, {"check1.passed", 0},
                               {"check2.value", 7.9}};
  std::size_t run_block = 0;
  while (!std::holds_alternative<LessonRun>(lesson->blocks[run_block])) ++run_block;
  const LessonValues shown = ValuesAbout(*lesson, run_block, values);
  ASSERT_EQ(shown.size(), 3u);
  EXPECT_EQ(shown[0].first, "gradient_ratio");
  EXPECT_EQ(shown[1].first, "max_ulp");
  EXPECT_EQ(shown[2].first, "fixed.gradient_ratio");
  // A run no question or text is about shows everything.
  auto plain =
      ParseLesson("---\ntitle: t\nsummary: s\n---\n```run\nscenario = \"x\"\nshow = [\"values\"]\n```\n", "p.md");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(ValuesAbout(*plain, 0, values).size(), values.size());
}

}  // namespace
}  // namespace dtlab
