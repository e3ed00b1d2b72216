// Which of a run's named values a lesson shows (a run block's show = ["values"]):
// the few numbers its questions and the narrative after it are about, not every
// value the scenario reports (show = ["all values"] prints those).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "lessons/lesson.h"

namespace dtlab {

using LessonValues = std::vector<std::pair<std::string, double>>;

/// The values of `values` (a run's, as the lesson player receives them: the main
/// run's by name, a variant's as "run.name", a check's as "checkN.name") that the
/// run block `run_block` of `lesson` is about, in `values`' order:
///   - the answer of each question just before the block;
///   - the same value of every other run, for comparison (the answer
///     "gradient_ratio" brings "fixed.gradient_ratio" along);
///   - every {{name}} the narrative after the block quotes, up to the next question
///     or run.
/// When none of these names a value, all of `values`.
LessonValues ValuesAbout(const Lesson& lesson, std::size_t run_block, const LessonValues& values);

}  // namespace dtlab
