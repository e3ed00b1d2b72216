// Lesson files (lessons/lesson.h) and the lesson player (lessons/lesson_player.h):
// parsing, the exact terminal output, predictions, the handout, and the corpus of
// malformed lesson files in tests/bad_inputs/lessons.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "lessons/lesson.h"
#include "lessons/lesson_player.h"

namespace dtlab {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLesson = R"(---
title: Loss scaling
summary: Why each replica divides by the global batch, not its own.
order: 3
---
# The pitfall

Each replica computes its loss on its **own** slice of the batch; with
`tf.reduce_mean` it divides by the local batch size.

```sh
dtlab run per-replica-mean
```

```question
ask = "With 4 replicas, how many times too large is the gradient?"
answer = "gradient_ratio"   # a value of the next run
tolerance = 0.05
unit = "x"
```

```run
scenario = "per-replica-mean"
set = ["cluster.replicas=4"]
```

The gradient was {{gradient_ratio}} times too large.

```run
scenario = "correct-scaling"
show = ["values"]
```
)";

// The runner's fixed output: "per-replica-mean" is 4x off, the other is right.
StatusOr<LessonRunOutput> FakeRun(const LessonRunRequest& request) {
  LessonRunOutput output;
  const bool pitfall = request.scenario == "per-replica-mean";
  output.text = std::string("step  replicas  gradient ratio  verdict\n") +
                (pitfall ? "   1         4          4.0000  CAUGHT\n" : "   1         4          1.0000  PASS\n");
  output.values = {{"gradient_ratio", pitfall ? 4.0 : 1.0}, {"loss", 0.5}};
  output.svg_plots = {"<svg class=\"dtlab-plot\" width=\"10\" height=\"10\"><title>loss</title></svg>"};
  return output;
}

Lesson ParseOrDie(const std::string& text, const std::string& path = "lessons/loss_scaling.md") {
  StatusOr<Lesson> lesson = ParseLesson(text, path);
  EXPECT_TRUE(lesson.ok()) << lesson.status().ToString();
  return lesson.ok() ? std::move(lesson).value() : Lesson();
}

struct Played {
  StatusOr<PlayReport> report;
  std::string out;
};

Played Play(const Lesson& lesson, const std::string& input, bool interactive, const LessonRunner& runner = FakeRun) {
  std::istringstream in(input);
  std::ostringstream out;
  PlayOptions options;
  options.interactive = interactive;
  options.in = &in;
  options.out = &out;
  StatusOr<PlayReport> report = PlayLesson(lesson, runner, options);
  return {std::move(report), out.str()};
}

TEST(LessonTest, ParsesAGoodLesson) {
  const Lesson lesson = ParseOrDie(kLesson);
  EXPECT_EQ(lesson.name, "loss_scaling");
  EXPECT_EQ(lesson.title, "Loss scaling");
  EXPECT_EQ(lesson.summary, "Why each replica divides by the global batch, not its own.");
  EXPECT_EQ(lesson.order, 3);
  ASSERT_EQ(lesson.blocks.size(), 5u);
  const auto& intro = std::get<LessonNarrative>(lesson.blocks[0]);
  EXPECT_EQ(intro.line, 6);
  EXPECT_TRUE(intro.text.starts_with("# The pitfall\n"));
  EXPECT_TRUE(intro.text.ends_with("dtlab run per-replica-mean\n```"));  // ordinary fences are narrative
  const auto& question = std::get<LessonQuestion>(lesson.blocks[1]);
  EXPECT_EQ(question.ask, "With 4 replicas, how many times too large is the gradient?");
  EXPECT_EQ(question.answer, "gradient_ratio");
  EXPECT_DOUBLE_EQ(question.tolerance, 0.05);
  EXPECT_EQ(question.unit, "x");
  EXPECT_EQ(question.line, 15);
  EXPECT_EQ(question.answer_line, 17);
  const auto& run = std::get<LessonRun>(lesson.blocks[2]);
  EXPECT_EQ(run.scenario, "per-replica-mean");
  EXPECT_EQ(run.sets, std::vector<std::string>{"cluster.replicas=4"});
  EXPECT_EQ(run.show, std::vector<std::string>{"table"});  // the default
  EXPECT_EQ(run.line, 22);
  EXPECT_EQ(std::get<LessonNarrative>(lesson.blocks[3]).line, 27);
  EXPECT_EQ(std::get<LessonRun>(lesson.blocks[4]).show, std::vector<std::string>{"values"});
}

TEST(LessonTest, DefaultsAndWindowsLineEnds) {
  const Lesson lesson = ParseOrDie(
      "---\r\ntitle: \"Quoted\"\r\nsummary: s\r\n---\r\n```question\r\nask = \"a?\"\r\nanswer = \"v\"\r\n```\r\n"
      "```run\r\nscenario = \"x\"\r\nshow = []\r\n```\r\n");
  EXPECT_EQ(lesson.title, "Quoted");
  EXPECT_EQ(lesson.order, Lesson::kUnordered);
  ASSERT_EQ(lesson.blocks.size(), 2u);
  EXPECT_DOUBLE_EQ(std::get<LessonQuestion>(lesson.blocks[0]).tolerance, 0.01);
  EXPECT_TRUE(std::get<LessonRun>(lesson.blocks[1]).show.empty());
}

TEST(LessonPlayerTest, NonInteractiveOutputIsExact) {
  const Lesson lesson = ParseOrDie(kLesson);
  const Played played = Play(lesson, "", false);
  ASSERT_TRUE(played.report.ok()) << played.report.status().ToString();
  EXPECT_EQ(played.out, R"(Loss scaling
============
Why each replica divides by the global batch, not its own.

The pitfall
===========

Each replica computes its loss on its own slice of the batch; with
`tf.reduce_mean` it divides by the local batch size.

    dtlab run per-replica-mean

(running per-replica-mean with cluster.replicas=4 ...)

Question: With 4 replicas, how many times too large is the gradient?

step  replicas  gradient ratio  verdict
   1         4          4.0000  CAUGHT

Answer: 4 x

The gradient was 4 times too large.

(running correct-scaling ...)

Values:
  gradient_ratio  1
  loss            0.5
)");
  ASSERT_EQ(played.report->runs.size(), 2u);
  EXPECT_EQ(played.report->runs[0].request.scenario, "per-replica-mean");
  EXPECT_EQ(played.report->runs[0].request.lesson_dir, "lessons");
  EXPECT_EQ(played.report->runs[0].request.sets, std::vector<std::string>{"cluster.replicas=4"});
  EXPECT_EQ(played.report->questions, 1);
  EXPECT_EQ(played.report->predictions_close, 0);
  EXPECT_TRUE(played.report->all_as_expected);
  EXPECT_FALSE(played.report->runs[0].answers[0].prediction.has_value());
}

TEST(LessonPlayerTest, InteractivePredictionIsRevealed) {
  const Played played = Play(ParseOrDie(kLesson), "3.5\n", true);
  ASSERT_TRUE(played.report.ok()) << played.report.status().ToString();
  EXPECT_NE(played.out.find("is the gradient?\nYour prediction: \nstep  replicas"), std::string::npos) << played.out;
  EXPECT_NE(played.out.find("Answer: 4 x \xE2\x80\x94 you said 3.5 (12.5% off) \xE2\x80\x94 not within 5%\n"),
            std::string::npos)
      << played.out;
  EXPECT_NE(played.out.find("You were close on 0 of 1 prediction.\n"), std::string::npos);
  EXPECT_EQ(played.report->runs[0].answers[0].prediction, 3.5);
  EXPECT_EQ(played.report->predictions_close, 0);
  EXPECT_EQ(played.out.find('\033'), std::string::npos);  // no colour unless asked
}

TEST(LessonPlayerTest, EmptyLineOrEndOfInputSkips) {
  for (const std::string input : {"\n", ""}) {
    const Played played = Play(ParseOrDie(kLesson), input, true);
    ASSERT_TRUE(played.report.ok()) << played.report.status().ToString();
    EXPECT_NE(played.out.find("Your prediction: "), std::string::npos);
    EXPECT_NE(played.out.find("Answer: 4 x\n"), std::string::npos) << played.out;
    EXPECT_EQ(played.out.find("you said"), std::string::npos);
    EXPECT_FALSE(played.report->runs[0].answers[0].prediction.has_value());
  }
}

TEST(LessonPlayerTest, GarbageIsAskedAgainOnceWithAHint) {
  Played played = Play(ParseOrDie(kLesson), "four\n4.1 x\n", true);
  ASSERT_TRUE(played.report.ok()) << played.report.status().ToString();
  EXPECT_NE(played.out.find("Your prediction: Please type a number such as 3.5 (the unit x is optional), or press "
                            "Enter to skip.\nYour prediction: "),
            std::string::npos)
      << played.out;
  EXPECT_NE(played.out.find("you said 4.1 (2.5% off) \xE2\x80\x94 close!"), std::string::npos) << played.out;
  EXPECT_EQ(played.report->predictions_close, 1);

  played = Play(ParseOrDie(kLesson), "four\nfive\n", true);  // twice: skipped
  ASSERT_TRUE(played.report.ok());
  EXPECT_NE(played.out.find("(skipped)\n"), std::string::npos);
  EXPECT_FALSE(played.report->runs[0].answers[0].prediction.has_value());
}

TEST(LessonPlayerTest, SeveralQuestionsShareTheirRunAndZeroUsesAbsoluteError) {
  const Lesson lesson = ParseOrDie(R"(---
title: Two
summary: Two questions, one run.
---
```question
ask = "Ratio?"
answer = "gradient_ratio"
```
```question
ask = "Error?"
answer = "error"
tolerance = 0.1
```
```run
scenario = "s"
show = []
```
)");
  const LessonRunner runner = [](const LessonRunRequest&) -> StatusOr<LessonRunOutput> {
    LessonRunOutput output;
    output.values = {{"gradient_ratio", 2}, {"error", 0}};
    return output;
  };
  const Played played = Play(lesson, "2.01\n0.05\n", true, runner);
  ASSERT_TRUE(played.report.ok()) << played.report.status().ToString();
  EXPECT_NE(played.out.find("Question: Ratio?\nYour prediction: \nQuestion: Error?\nYour prediction: \n"
                            "Answer: 2 \xE2\x80\x94 you said 2.01 (0.5% off) \xE2\x80\x94 close!\n"
                            "Answer: 0 \xE2\x80\x94 you said 0.05 (off by 0.05) \xE2\x80\x94 close!\n"),
            std::string::npos)
      << played.out;
  EXPECT_EQ(played.report->questions, 2);
  EXPECT_EQ(played.report->predictions_close, 2);
}

TEST(LessonPlayerTest, ColourAndWrapping) {
  const Lesson lesson =
      ParseOrDie("---\ntitle: T\nsummary: S\n---\nOne **two** three four five six seven eight nine\n");
  std::ostringstream out;
  PlayOptions options;
  options.out = &out;
  options.width = 20;
  options.color = true;
  ASSERT_TRUE(PlayLesson(lesson, FakeRun, options).ok());
  EXPECT_EQ(out.str(), "\033[1mT\033[0m\n=\nS\n\nOne \033[1mtwo\033[0m three four\nfive six seven eight\nnine\n");
}

TEST(LessonPlayerTest, UnknownNamesAreErrorsNamingTheLine) {
  // {{name}} that the latest run does not report.
  std::string text = kLesson;
  text.replace(text.find("{{gradient_ratio}}"), 18, "{{ratio}}");
  Played played = Play(ParseOrDie(text), "", false);
  ASSERT_FALSE(played.report.ok());
  EXPECT_EQ(played.report.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(played.report.status().message(),
            "lessons/loss_scaling.md:27: {{ratio}} is not a value of the latest run (scenario 'per-replica-mean'); "
            "its values are gradient_ratio, loss");

  // {{name}} before any run.
  played = Play(ParseOrDie("---\ntitle: T\nsummary: S\n---\n\nSee {{x}}.\n", "t.md"), "", false);
  ASSERT_FALSE(played.report.ok());
  EXPECT_TRUE(played.report.status().message().starts_with("t.md:6: {{x}} names a value of the latest run, but no"));

  // An answer that the run does not report.
  text = kLesson;
  text.replace(text.find("answer = \"gradient_ratio\""), 25, "answer = \"ratio\"");
  played = Play(ParseOrDie(text), "", false);
  ASSERT_FALSE(played.report.ok());
  EXPECT_EQ(played.report.status().message(),
            "lessons/loss_scaling.md:17: answer 'ratio' is not a value of scenario 'per-replica-mean' "
            "(run at line 22); its values are gradient_ratio, loss");
}

TEST(LessonPlayerTest, RunnerErrorsAndUnexpectedVerdicts) {
  const Lesson lesson = ParseOrDie(kLesson);
  Played played = Play(lesson, "", false, [](const LessonRunRequest&) -> StatusOr<LessonRunOutput> {
    return Status::Runtime("replica 2 crashed");
  });
  ASSERT_FALSE(played.report.ok());
  EXPECT_EQ(played.report.status().code(), Status::Code::kRuntime);  // exit 3 stays exit 3
  EXPECT_EQ(played.report.status().message(),
            "lessons/loss_scaling.md:22: scenario 'per-replica-mean': replica 2 crashed");

  played = Play(lesson, "", false, [](const LessonRunRequest& request) {
    StatusOr<LessonRunOutput> output = FakeRun(request);
    output->verdicts_as_expected = request.scenario != "correct-scaling";
    return output;
  });
  ASSERT_TRUE(played.report.ok());
  EXPECT_FALSE(played.report->all_as_expected);
  EXPECT_NE(played.out.find("Note: this run's verdicts were not what the scenario expects."), std::string::npos);
}

TEST(LessonPlayerTest, HandoutHasTheLessonQuestionsAnswersAndPlots) {
  const Lesson lesson = ParseOrDie(kLesson);
  const Played played = Play(lesson, "3.5\n", true);
  ASSERT_TRUE(played.report.ok());
  const std::string html = RenderHandout(lesson, *played.report);
  EXPECT_TRUE(html.starts_with("<!DOCTYPE html>"));
  EXPECT_NE(html.find("<h1>Loss scaling</h1>"), std::string::npos);
  EXPECT_NE(html.find("Why each replica divides by the global batch, not its own."), std::string::npos);
  EXPECT_NE(html.find("<h2>The pitfall</h2>"), std::string::npos);
  EXPECT_NE(html.find("With 4 replicas, how many times too large is the gradient?"), std::string::npos);
  EXPECT_NE(html.find("Answer: 4 x \xE2\x80\x94 you said 3.5 (12.5% off)"), std::string::npos);
  EXPECT_NE(html.find("The gradient was 4 times too large."), std::string::npos);
  EXPECT_NE(html.find("4.0000  CAUGHT"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">0.5</td>"), std::string::npos);  // show = ["values"]
  EXPECT_NE(html.find("<svg class=\"dtlab-plot\" width=\"10\" height=\"10\"><title>loss</title></svg>"),
            std::string::npos);
}

// ---- files and directories -------------------------------------------------

fs::path SourceDir() {
  if (const char* dir = std::getenv("DTLAB_SOURCE_DIR")) return dir;
  return DTLAB_TEST_SOURCE_DIR;  // not __FILE__: a compiler launcher (ccache) may make it relative
}

fs::path FreshDirectory(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("dtlab_lesson_test." + name + "." + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void WriteFile(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

TEST(LessonTest, DirectoryIsSortedByOrderThenNameWithoutReadme) {
  const fs::path dir = FreshDirectory("directory");
  WriteFile(dir / "b.md", "---\ntitle: B\nsummary: s\norder: 2\n---\n");
  WriteFile(dir / "a.md", "---\ntitle: A\nsummary: s\n---\n");  // no order: last
  WriteFile(dir / "c.md", "---\ntitle: C\nsummary: s\norder: 1\n---\n");
  WriteFile(dir / "d.md", "---\ntitle: D\nsummary: s\norder: 2\n---\n");
  WriteFile(dir / "README.md", "# not a lesson\n");
  WriteFile(dir / "notes.txt", "not a lesson either\n");
  StatusOr<std::vector<Lesson>> lessons = LoadLessonDirectory(dir.string());
  ASSERT_TRUE(lessons.ok()) << lessons.status().ToString();
  std::string names;
  for (const Lesson& lesson : *lessons) names += lesson.name;
  EXPECT_EQ(names, "cbda");

  StatusOr<Lesson> found = FindLesson(dir.string(), "d");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->title, "D");
  found = FindLesson(dir.string(), "e");
  EXPECT_EQ(found.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(found.status().message(), "no lesson 'e' in " + dir.string() + "; lessons there: a, b, c, d");
  EXPECT_EQ(LoadLesson((dir / "zz.md").string()).status().code(), Status::Code::kNotFound);

  WriteFile(dir / "bad.md", "---\ntitle: X\n");
  EXPECT_TRUE(LoadLessonDirectory(dir.string()).status().message().starts_with((dir / "bad.md").string() + ":1: "));
  fs::remove_all(dir);
}

// Every file of tests/bad_inputs/lessons fails with FILE:LINE: and its message.
TEST(LessonTest, MalformedFileCorpus) {
  const fs::path dir = SourceDir() / "tests" / "bad_inputs" / "lessons";
  std::ifstream table(dir / "expected.tsv");
  ASSERT_TRUE(table) << "cannot read " << (dir / "expected.tsv");
  std::set<std::string> listed;
  std::string row;
  while (std::getline(table, row)) {
    if (row.empty()) continue;
    std::istringstream fields(row);
    std::string file, line, substring;
    ASSERT_TRUE(std::getline(fields, file, '\t') && std::getline(fields, line, '\t') && std::getline(fields, substring))
        << "malformed row: " << row;
    listed.insert(file);
    const std::string path = (dir / file).string();
    const StatusOr<Lesson> lesson = LoadLesson(path);
    ASSERT_FALSE(lesson.ok()) << file << " parsed";
    EXPECT_EQ(lesson.status().code(), Status::Code::kInvalidArgument) << file;
    const std::string& message = lesson.status().message();
    EXPECT_TRUE(message.starts_with(path + ":" + line + ": ")) << file << ": " << message;
    EXPECT_NE(message.find(substring), std::string::npos) << file << ": " << message;
  }
  EXPECT_GE(listed.size(), 12u);
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() == ".md" && name != "README.md") {
      EXPECT_TRUE(listed.count(name)) << name << " is not in expected.tsv";
    }
  }
}

}  // namespace
}  // namespace dtlab
