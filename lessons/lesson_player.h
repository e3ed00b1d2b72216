// The lesson player: shows a lesson on a terminal, asks its questions before
// revealing each run, and renders a self-contained HTML handout of what was played.
//
// The player does not run scenarios itself: it calls a LessonRunner, so that it is
// tested with a fake one and the command line plugs in the scenario runner. Output
// is deterministic for a given runner (no clock, no randomness): golden tests
// compare it byte for byte.
//
// Thread safety: PlayLesson writes to the given streams only; distinct calls with
// distinct streams may run concurrently.
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "lessons/lesson.h"

namespace dtlab {

/// What a run block asks the runner for.
struct LessonRunRequest {
  std::string scenario;           // as written in the lesson: a name or a relative path
  std::vector<std::string> sets;  // "key=value" overrides, in order
  std::string lesson_dir;         // directory of the lesson file, to resolve relative paths
};

/// What the runner reports of one run.
struct LessonRunOutput {
  std::string text;                                    // the run's verdict table as printed
  std::string handout_text;                            // as the handout shows it (plain, 80 columns); empty: text
  std::vector<std::pair<std::string, double>> values;  // named numbers, e.g. {"gradient_ratio", 4.0}
  std::vector<std::string> svg_plots;                  // inline <svg> elements, for the handout
  bool verdicts_as_expected = true;
};

/// Runs one scenario. An error status stops the lesson; its code is kept.
using LessonRunner = std::function<StatusOr<LessonRunOutput>(const LessonRunRequest&)>;

struct PlayOptions {
  bool interactive = false;     // prompt for predictions on `in`
  std::istream* in = nullptr;   // required when interactive
  std::ostream* out = nullptr;  // required
  int width = 80;               // paragraphs are wrapped to this many columns
  int fit_width = 0;            // code and tables wider than this wrap at spaces (0: printed as written)
  bool color = false;           // ANSI bold and colours
};

/// A question's answer as played: the true value and the prediction, if any.
struct PlayedAnswer {
  std::string name;                  // the value's name
  double value = 0;                  // what the run reported
  std::optional<double> prediction;  // empty: not interactive, skipped, or no number given
  bool close = false;                // prediction within the question's tolerance
};

struct PlayedRun {
  std::size_t block = 0;  // index of the run block in Lesson::blocks
  int line = 0;           // its line in the lesson file
  LessonRunRequest request;
  LessonRunOutput output;
  std::vector<PlayedAnswer> answers;  // one per question before the run, in order
};

struct PlayReport {
  std::vector<PlayedRun> runs;  // in lesson order
  int questions = 0, predictions_close = 0;
  bool all_as_expected = true;  // every run's verdicts were as expected (else exit 1)
};

/// Plays `lesson` on options.out (see lessons/README.md for what is printed). Errors:
/// InvalidArgument "FILE:LINE: ..." for an answer or {{name}} that the latest run
/// does not report; a runner error is returned with "FILE:LINE: scenario 'x'" before it.
StatusOr<PlayReport> PlayLesson(const Lesson& lesson, const LessonRunner& run, const PlayOptions& options);

/// The handout: an HTML page (report::HtmlDocument) with the lesson's text, each
/// question with its answer (and the prediction, when one was made), and each run's
/// text and plots. `played` must come from PlayLesson on the same lesson.
std::string RenderHandout(const Lesson& lesson, const PlayReport& played);

}  // namespace dtlab
