// Lesson files: Markdown with a front matter, narrative, questions and run blocks.
//
// A lesson is a text file an instructor edits without recompiling (the format is
// specified in lessons/README.md). Parsing is strict so that a typo fails before a
// workshop, not during it: every error is Status::InvalidArgument (exit 2) with the
// message "FILE:LINE: what is wrong; allowed ... are ...", LINE counted in the
// lesson file (also inside the TOML bodies of question and run blocks).
//
// Thread safety: the functions are reentrant; a Lesson is a value.
#pragma once

#include <limits>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"

namespace dtlab {

/// Markdown to show as it is (headings, paragraphs, lists, ordinary code fences).
/// `{{name}}` outside code fences is replaced by a value of the latest run.
struct LessonNarrative {
  std::string text;  // the lines of the file, joined by '\n' (no trailing newline)
  int line = 0;      // line of the first line of `text`
};

/// A ```question block: a prediction asked before the NEXT run block is shown.
struct LessonQuestion {
  std::string ask;          // the question as printed
  std::string answer;       // name of a value the next run reports
  double tolerance = 0.01;  // relative (absolute when the true value is 0)
  std::string unit;         // printed after numbers, e.g. "x" or "%"; may be empty
  int line = 0;             // line of the opening fence
  int answer_line = 0;      // line of the `answer =` key
};

/// A ```run block: one scenario run, with overrides, and what to print of it.
struct LessonRun {
  std::string scenario;                       // built-in name, or a path relative to the lesson file
  std::vector<std::string> sets;              // "key=value" overrides, in order
  std::vector<std::string> show = {"table"};  // each "table", "values" or "all values"; may be empty
  int line = 0;                               // line of the opening fence
};

using LessonBlock = std::variant<LessonNarrative, LessonQuestion, LessonRun>;

struct Lesson {
  /// `order` when the front matter has none: such lessons sort last, by name.
  static constexpr int kUnordered = std::numeric_limits<int>::max();

  std::string path;  // as given to ParseLesson / LoadLesson
  std::string name;  // file stem: "loss_scaling" for lessons/loss_scaling.md
  std::string title, summary;
  int order = kUnordered;
  std::vector<LessonBlock> blocks;  // in file order; every question is followed by a run
};

/// Parses the text of a lesson file; `path` names it in error messages and in Lesson.
StatusOr<Lesson> ParseLesson(const std::string& text, const std::string& path);

/// Reads and parses one lesson file (NotFound if it does not exist).
StatusOr<Lesson> LoadLesson(const std::string& path);

/// Every lesson of `dir` (*.md except README.md, not recursive), sorted by order,
/// then name. The first malformed file (by name) fails the whole call.
StatusOr<std::vector<Lesson>> LoadLessonDirectory(const std::string& dir);

/// The lesson `name` of `dir` (`dir/name.md`), or the file `name` itself when it is
/// a path to an existing file. NotFound lists the lessons that `dir` has.
StatusOr<Lesson> FindLesson(const std::string& dir, const std::string& name);

}  // namespace dtlab
