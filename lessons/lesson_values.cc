#include "lessons/lesson_values.h"

#include <algorithm>
#include <set>
#include <variant>

namespace dtlab {
namespace {

// "check2.value": a check's number, not a run's.
bool IsCheckValue(const std::string& name) {
  const std::size_t digits = name.find_first_not_of("0123456789", 5);
  return name.starts_with("check") && digits > 5 && digits < name.size() && name[digits] == '.';
}

// "fixed.gradient_ratio" -> "gradient_ratio"; a check's values keep their prefix:
// checks are not runs to compare.
std::string BaseName(const std::string& name) {
  const std::size_t dot = name.find('.');
  if (dot == std::string::npos || IsCheckValue(name)) return name;
  return name.substr(dot + 1);
}

// The names inside {{...}} in `text`.
void AddQuoted(const std::string& text, std::set<std::string>& names) {
  for (std::size_t at = 0;;) {
    const std::size_t open = text.find("{{", at);
    const std::size_t close = open == std::string::npos ? open : text.find("}}", open + 2);
    if (close == std::string::npos) return;
    std::string name = text.substr(open + 2, close - open - 2);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    names.insert(name);
    at = close + 2;
  }
}

}  // namespace

LessonValues ValuesAbout(const Lesson& lesson, std::size_t run_block, const LessonValues& values) {
  std::set<std::string> answers, quoted;
  for (std::size_t k = run_block; k-- > 0 && std::holds_alternative<LessonQuestion>(lesson.blocks[k]);)
    answers.insert(std::get<LessonQuestion>(lesson.blocks[k]).answer);
  for (std::size_t k = run_block + 1; k < lesson.blocks.size(); ++k) {
    const auto* narrative = std::get_if<LessonNarrative>(&lesson.blocks[k]);
    if (narrative == nullptr) break;
    AddQuoted(narrative->text, quoted);
  }
  std::set<std::string> compared;
  for (const std::string& answer : answers) compared.insert(BaseName(answer));
  LessonValues shown;
  for (const auto& [name, value] : values) {
    const bool about = answers.count(name) > 0 || quoted.count(name) > 0 ||
                       (!IsCheckValue(name) && compared.count(BaseName(name)) > 0);
    if (about) shown.emplace_back(name, value);
  }
  return shown.empty() ? values : shown;
}

}  // namespace dtlab
