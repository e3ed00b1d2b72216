#include "lessons/lesson.h"

#include "core/checked_number.h"
#include "core/text.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>

#include "core/file_io.h"

namespace dtlab {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kFrontMatterHelp =
    "a lesson starts with a front matter: a line '---', then 'title: ...', 'summary: ...', "
    "optional 'order: N', and a closing line '---'";
constexpr std::string_view kQuestionKeys = "ask, answer, tolerance, unit";
constexpr std::string_view kRunKeys = "scenario, set, show";
constexpr std::string_view kShowItems = "table, values, all values";

// Info strings of ordinary code fences, shown as narrative. A closed list, so that a
// typo such as ```rn is an error instead of a run block silently shown as code.
constexpr std::string_view kNarrativeFences[] = {
    "text", "txt",  "plaintext", "output", "console", "sh",  "bash", "shell",    "python", "py",  "cpp", "c++",
    "c",    "cuda", "toml",      "json",   "yaml",    "ini", "diff", "markdown", "md",     "csv", "tsv"};

Status Error(const std::string& path, int line, const std::string& what) {
  return Status::InvalidArgument(path + ":" + std::to_string(line) + ": " + what);
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Lines without their '\n' (and a '\r' before it); a final newline adds no empty line.
std::vector<std::string> SplitLines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.emplace_back(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

// Levenshtein distance, for "did you mean" hints on fence info strings.
std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// Whether `line` opens or closes a code fence (``` after optional indentation);
// stores the number of backticks and the info string.
bool ParseFence(std::string_view line, std::size_t* ticks, std::string_view* info) {
  line = Trim(line);
  std::size_t n = 0;
  while (n < line.size() && line[n] == '`') ++n;
  if (n < 3) return false;
  *ticks = n;
  *info = Trim(line.substr(n));
  return true;
}

// ---- front matter ----------------------------------------------------------

// Parses lines [1, close) of the front matter into `lesson`. Line numbers are 1-based.
Status ParseFrontMatter(const std::vector<std::string>& lines, std::size_t close, Lesson* lesson) {
  const std::string& path = lesson->path;
  bool has_title = false, has_summary = false, has_order = false;
  for (std::size_t i = 1; i < close; ++i) {
    const int line = static_cast<int>(i) + 1;
    const std::string_view text = Trim(lines[i]);
    if (text.empty() || text.front() == '#') continue;  // blank lines and YAML-style comments
    const std::size_t colon = text.find(':');
    if (colon == std::string_view::npos) {
      return Error(path, line,
                   "expected 'key: value' in the front matter, got '" + std::string(text) +
                       "'; allowed keys are title, summary, order");
    }
    const std::string key(Trim(text.substr(0, colon)));
    std::string_view value = Trim(text.substr(colon + 1));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    bool* seen = key == "title" ? &has_title : key == "summary" ? &has_summary : key == "order" ? &has_order : nullptr;
    if (seen == nullptr) {
      return Error(path, line, "unknown front-matter key '" + key + "'; allowed keys are title, summary, order");
    }
    if (*seen) return Error(path, line, "front-matter key '" + key + "' is given twice");
    *seen = true;
    if (key == "order") {
      // Digits with an optional sign, in range: "3", "-1"; not "3.5" or "three".
      auto parsed = ParseInteger<int>(Trim(value), "order", -1000000, 1000000);
      if (!parsed.ok())
        return Error(path, line,
                     "order must be an integer (lessons are listed by it), got '" + std::string(value) + "'");
      lesson->order = *parsed;
    } else {
      if (value.empty()) return Error(path, line, "front-matter key '" + key + "' is empty");
      (key == "title" ? lesson->title : lesson->summary) = std::string(value);
    }
  }
  if (!has_title) return Error(path, 1, "the front matter has no title; " + std::string(kFrontMatterHelp));
  if (!has_summary) return Error(path, 1, "the front matter has no summary; " + std::string(kFrontMatterHelp));
  return Status::Ok();
}

// ---- TOML bodies of question and run blocks --------------------------------

// Parses a TOML body or returns the syntax error at its line in the lesson file.
// `fence_line` is the lesson line of the opening fence, so TOML line k is fence_line + k.
StatusOr<toml::table> ParseToml(const std::string& body, const std::string& path, int fence_line,
                                std::string_view block, std::string_view keys) {
  const auto syntax_error = [&](const toml::parse_error& err) {
    const int line = fence_line + std::max<int>(1, static_cast<int>(err.source().begin.line));
    return Error(path, line,
                 "TOML syntax error in the " + std::string(block) + " block: " + std::string(err.description()) +
                     "; allowed keys are " + std::string(keys));
  };
#if TOML_EXCEPTIONS
  try {
    return toml::parse(body, path);
  } catch (const toml::parse_error& err) {
    return syntax_error(err);
  }
#else
  toml::parse_result result = toml::parse(body, path);
  if (!result) return syntax_error(result.error());
  return std::move(result).table();
#endif
}

std::string TypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a number";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "a list";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date or time";
  }
}

// Reads a TOML block's keys with their lesson-file lines for error messages.
class BlockReader {
 public:
  BlockReader(const toml::table& table, const std::string& path, int fence_line, std::string_view block,
              std::string_view keys)
      : table_(table), path_(path), fence_line_(fence_line), block_(block), keys_(keys) {}

  int LineOf(const toml::node& node) const {
    const int line = static_cast<int>(node.source().begin.line);
    return line > 0 ? fence_line_ + line : fence_line_;
  }

  Status CheckKeys() const {
    for (auto&& [key, node] : table_) {
      if (!IsListed(key.str())) {
        return Error(path_, LineOf(node),
                     "unknown key '" + std::string(key.str()) + "' in a " + std::string(block_) +
                         " block; allowed keys are " + std::string(keys_));
      }
    }
    return Status::Ok();
  }

  // A non-empty string; `required` makes a missing key an error at the fence line.
  Status GetString(std::string_view key, bool required, std::string* out, int* line = nullptr) const {
    const toml::node* node = table_.get(key);
    if (node == nullptr) {
      if (!required) return Status::Ok();
      return Error(path_, fence_line_,
                   "the " + std::string(block_) + " block has no '" + std::string(key) + "'; allowed keys are " +
                       std::string(keys_));
    }
    if (line != nullptr) *line = LineOf(*node);
    const auto* value = node->as_string();
    if (value == nullptr) {
      return Error(path_, LineOf(*node), "'" + std::string(key) + "' must be a string, got " + TypeName(*node));
    }
    if (Trim(value->get()).empty()) return Error(path_, LineOf(*node), "'" + std::string(key) + "' is empty");
    *out = value->get();
    return Status::Ok();
  }

  // A list of strings, each passing `check` (which returns an error text or "").
  template <typename Check>
  Status GetStringList(std::string_view key, std::string_view example, Check check,
                       std::vector<std::string>* out) const {
    const toml::node* node = table_.get(key);
    if (node == nullptr) return Status::Ok();
    const auto* array = node->as_array();
    if (array == nullptr) {
      return Error(path_, LineOf(*node),
                   "'" + std::string(key) + "' must be a list of strings like " + std::string(example) + ", got " +
                       TypeName(*node));
    }
    out->clear();
    for (const toml::node& item : *array) {
      const auto* value = item.as_string();
      if (value == nullptr) {
        return Error(path_, LineOf(item),
                     "'" + std::string(key) + "' must be a list of strings like " + std::string(example) +
                         ", got an item that is " + TypeName(item));
      }
      const std::string problem = check(value->get());
      if (!problem.empty()) return Error(path_, LineOf(item), problem);
      out->push_back(value->get());
    }
    return Status::Ok();
  }

 private:
  // Whether `key` is one of the comma-separated `keys_` (a whole word: not "sk").
  bool IsListed(std::string_view key) const {
    if (key.empty()) return false;
    std::size_t at = 0;
    while ((at = keys_.find(key, at)) != std::string_view::npos) {
      const bool starts = at == 0 || keys_[at - 1] == ' ';
      const bool ends = at + key.size() == keys_.size() || keys_[at + key.size()] == ',';
      if (starts && ends) return true;
      ++at;
    }
    return false;
  }

  const toml::table& table_;
  const std::string& path_;
  int fence_line_;
  std::string_view block_, keys_;
};

StatusOr<LessonQuestion> ParseQuestion(const std::string& body, const std::string& path, int fence_line) {
  DTLAB_ASSIGN_OR_RETURN(const toml::table table, ParseToml(body, path, fence_line, "question", kQuestionKeys));
  const BlockReader reader(table, path, fence_line, "question", kQuestionKeys);
  DTLAB_RETURN_IF_ERROR(reader.CheckKeys());
  LessonQuestion question;
  question.line = fence_line;
  DTLAB_RETURN_IF_ERROR(reader.GetString("ask", true, &question.ask));
  DTLAB_RETURN_IF_ERROR(reader.GetString("answer", true, &question.answer, &question.answer_line));
  if (question.answer.find_first_of(" \t{}") != std::string::npos) {
    return Error(path, question.answer_line,
                 "'answer' must be the name of a value of the next run (e.g. \"gradient_ratio\"), got '" +
                     question.answer + "'");
  }
  if (table.contains("unit")) {
    const toml::node& node = *table.get("unit");
    if (!node.is_string()) return Error(path, reader.LineOf(node), "'unit' must be a string, got " + TypeName(node));
    question.unit = std::string(Trim(node.as_string()->get()));
  }
  if (const toml::node* node = table.get("tolerance")) {
    const std::optional<double> value =
        node->is_integer() || node->is_floating_point() ? node->value<double>() : std::nullopt;
    if (!value)
      return Error(
          path, reader.LineOf(*node),
          "'tolerance' must be a non-negative number (a relative error: 0.05 allows 5%), got " + TypeName(*node));
    if (Status valid = CheckRelativeTolerance(*value, "'tolerance'"); !valid.ok())
      return Error(path, reader.LineOf(*node), valid.message());
    question.tolerance = *value;
  }
  return question;
}

StatusOr<LessonRun> ParseRun(const std::string& body, const std::string& path, int fence_line) {
  DTLAB_ASSIGN_OR_RETURN(const toml::table table, ParseToml(body, path, fence_line, "run", kRunKeys));
  const BlockReader reader(table, path, fence_line, "run", kRunKeys);
  DTLAB_RETURN_IF_ERROR(reader.CheckKeys());
  LessonRun run;
  run.line = fence_line;
  DTLAB_RETURN_IF_ERROR(reader.GetString("scenario", true, &run.scenario));
  DTLAB_RETURN_IF_ERROR(reader.GetStringList(
      "set", "[\"cluster.replicas=4\"]",
      [](const std::string& item) -> std::string {
        const std::size_t eq = item.find('=');
        if (eq == std::string::npos || Trim(std::string_view(item).substr(0, eq)).empty()) {
          return "'set' item '" + item + "' is not of the form key=value (e.g. \"cluster.replicas=4\")";
        }
        return "";
      },
      &run.sets));
  DTLAB_RETURN_IF_ERROR(reader.GetStringList(
      "show", "[\"table\", \"values\"]",
      [](const std::string& item) -> std::string {
        if (item == "table" || item == "values" || item == "all values") return "";
        return "unknown show item '" + item + "'; allowed values are " + std::string(kShowItems);
      },
      &run.show));
  return run;
}

// ---- body ------------------------------------------------------------------

// Adds the pending narrative lines as a block, without leading and trailing blank lines.
void FlushNarrative(std::vector<std::string>* lines, int first_line, std::vector<LessonBlock>* blocks) {
  std::size_t begin = 0, end = lines->size();
  while (begin < end && Trim((*lines)[begin]).empty()) ++begin;
  while (end > begin && Trim((*lines)[end - 1]).empty()) --end;
  if (begin < end) {
    LessonNarrative narrative;
    narrative.line = first_line + static_cast<int>(begin);
    for (std::size_t i = begin; i < end; ++i) {
      if (i > begin) narrative.text += '\n';
      narrative.text += (*lines)[i];
    }
    blocks->push_back(std::move(narrative));
  }
  lines->clear();
}

std::string FenceHelp() {
  std::string known;
  for (std::string_view name : kNarrativeFences) known += ", " + std::string(name);
  return "a fence is ```question, ```run, or an ordinary code block: ``` (no info string)" + known;
}

Status ParseBody(const std::vector<std::string>& lines, std::size_t begin, Lesson* lesson) {
  const std::string& path = lesson->path;
  std::vector<std::string> pending;
  int pending_line = static_cast<int>(begin) + 1;
  for (std::size_t i = begin; i < lines.size();) {
    std::size_t ticks = 0;
    std::string_view info;
    if (!ParseFence(lines[i], &ticks, &info)) {
      if (pending.empty()) pending_line = static_cast<int>(i) + 1;
      pending.push_back(lines[i++]);
      continue;
    }
    const int fence_line = static_cast<int>(i) + 1;
    const std::string word(info.substr(0, info.find_first_of(" \t{")));
    std::size_t close = i + 1;
    for (std::size_t close_ticks = 0; close < lines.size(); ++close) {
      std::string_view close_info;
      if (ParseFence(lines[close], &close_ticks, &close_info) && close_ticks >= ticks && close_info.empty()) break;
    }
    if (close == lines.size()) {
      return Error(path, fence_line,
                   "unterminated code fence '" + std::string(Trim(lines[i])) + "': no closing line " +
                       std::string(ticks, '`') + " before the end of the file");
    }
    if (word == "question" || word == "run") {
      if (word != info) {
        return Error(
            path, fence_line,
            "unexpected text after ```" + word + ": '" + std::string(info) + "'; the fence line is just ```" + word);
      }
      FlushNarrative(&pending, pending_line, &lesson->blocks);
      std::string body;
      for (std::size_t k = i + 1; k < close; ++k) body += lines[k] + "\n";
      if (word == "question") {
        DTLAB_ASSIGN_OR_RETURN(LessonQuestion question, ParseQuestion(body, path, fence_line));
        lesson->blocks.push_back(std::move(question));
      } else {
        DTLAB_ASSIGN_OR_RETURN(LessonRun run, ParseRun(body, path, fence_line));
        lesson->blocks.push_back(std::move(run));
      }
    } else {
      const std::string lower = Lower(word);
      const bool known = word.empty() || std::find(std::begin(kNarrativeFences), std::end(kNarrativeFences), lower) !=
                                             std::end(kNarrativeFences);
      if (!known) {
        std::string hint;
        if (EditDistance(lower, "run") <= 1 || EditDistance(lower, "question") <= 2) {
          hint = " (did you mean ```" + std::string(EditDistance(lower, "run") <= 1 ? "run" : "question") + "?)";
        }
        return Error(path, fence_line, "unknown fence info '" + word + "'" + hint + "; " + FenceHelp());
      }
      if (pending.empty()) pending_line = fence_line;
      pending.insert(pending.end(), lines.begin() + static_cast<std::ptrdiff_t>(i),
                     lines.begin() + static_cast<std::ptrdiff_t>(close) + 1);
    }
    i = close + 1;
  }
  FlushNarrative(&pending, pending_line, &lesson->blocks);

  // A question is answered by the run right after it (more questions may come
  // between); narrative in between would be shown before the question is revealed.
  for (std::size_t k = 0; k < lesson->blocks.size(); ++k) {
    const auto* question = std::get_if<LessonQuestion>(&lesson->blocks[k]);
    if (question == nullptr) continue;
    std::size_t next = k + 1;
    while (next < lesson->blocks.size() && std::holds_alternative<LessonQuestion>(lesson->blocks[next])) ++next;
    if (next == lesson->blocks.size() || !std::holds_alternative<LessonRun>(lesson->blocks[next])) {
      return Error(path, question->line,
                   "this question is not followed by a run block; a ```question must come right before the ```run "
                   "block that answers it (only blank lines or more questions may come between)");
    }
  }
  return Status::Ok();
}

// Escapes the text a lesson shows (EscapeControl): a control character from the
// file, raw or written as a TOML escape, must not act on the audience's terminal.
void EscapeText(Lesson& lesson) {
  for (std::string* text : {&lesson.name, &lesson.title, &lesson.summary}) *text = EscapeControl(*text);
  for (LessonBlock& block : lesson.blocks) {
    if (auto* narrative = std::get_if<LessonNarrative>(&block)) {
      narrative->text = EscapeControl(narrative->text, /*keep_line_breaks=*/true);
    } else if (auto* question = std::get_if<LessonQuestion>(&block)) {
      question->ask = EscapeControl(question->ask, /*keep_line_breaks=*/true);
      question->unit = EscapeControl(question->unit);
    }
  }
}

}  // namespace

StatusOr<Lesson> ParseLesson(const std::string& text, const std::string& path) {
  Lesson lesson;
  lesson.path = path;
  lesson.name = fs::path(path).stem().string();
  std::string_view view = text;
  if (view.starts_with("\xEF\xBB\xBF")) view.remove_prefix(3);  // a UTF-8 byte order mark
  if (Trim(view).empty()) return Error(path, 1, "empty lesson file; " + std::string(kFrontMatterHelp));
  const std::vector<std::string> lines = SplitLines(view);
  if (Trim(lines[0]) != "---") return Error(path, 1, "missing front matter; " + std::string(kFrontMatterHelp));
  std::size_t close = 1;
  while (close < lines.size() && Trim(lines[close]) != "---") ++close;
  if (close == lines.size()) {
    return Error(path, 1, "unterminated front matter: no closing line '---'; " + std::string(kFrontMatterHelp));
  }
  DTLAB_RETURN_IF_ERROR(ParseFrontMatter(lines, close, &lesson));
  DTLAB_RETURN_IF_ERROR(ParseBody(lines, close + 1, &lesson));
  EscapeText(lesson);
  return lesson;
}

StatusOr<Lesson> LoadLesson(const std::string& path) {
  DTLAB_ASSIGN_OR_RETURN(const std::string text, ReadRegularFile(path, kMaxTextFileBytes, "lesson file"));
  return ParseLesson(text, path);
}

namespace {

// The lesson files of `dir`, sorted by file name.
StatusOr<std::vector<fs::path>> LessonFiles(const std::string& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) return Status::NotFound("lesson directory " + dir + " does not exist");
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const fs::path& file = it->path();
    if (file.extension() == ".md" && Lower(file.filename().string()) != "readme.md" && it->is_regular_file(error)) {
      files.push_back(file);
    }
  }
  if (error) return Status::IOError(dir + ": cannot list: " + error.message());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

StatusOr<std::vector<Lesson>> LoadLessonDirectory(const std::string& dir) {
  DTLAB_ASSIGN_OR_RETURN(const std::vector<fs::path> files, LessonFiles(dir));
  std::vector<Lesson> lessons;
  for (const fs::path& file : files) {
    DTLAB_ASSIGN_OR_RETURN(Lesson lesson, LoadLesson(file.string()));
    lessons.push_back(std::move(lesson));
  }
  std::stable_sort(lessons.begin(), lessons.end(), [](const Lesson& a, const Lesson& b) {
    return std::tie(a.order, a.name) < std::tie(b.order, b.name);
  });
  return lessons;
}

StatusOr<Lesson> FindLesson(const std::string& dir, const std::string& name) {
  std::error_code error;
  // A path that exists goes to the reader even when it is not a regular file, so
  // that a FIFO or a device is named as such ("is a FIFO, not a regular file").
  if ((name.ends_with(".md") || name.find('/') != std::string::npos) && fs::exists(name, error)) {
    return LoadLesson(name);
  }
  const fs::path file = fs::path(dir) / (name + ".md");
  if (fs::is_regular_file(file, error)) return LoadLesson(file.string());
  DTLAB_ASSIGN_OR_RETURN(const std::vector<fs::path> files, LessonFiles(dir));
  std::string names;
  for (const fs::path& f : files) names += (names.empty() ? "" : ", ") + f.stem().string();
  return Status::NotFound("no lesson '" + name + "' in " + dir +
                          "; lessons there: " + (names.empty() ? "(none)" : names));
}

}  // namespace dtlab
