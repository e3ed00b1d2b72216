#include "cli/terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "scenarios/text_table.h"

namespace dtlab::cli {
namespace {

// COLUMNS as a positive number, or 0 when it is unset or not a number.
int ColumnsVariable() {
  const char* text = std::getenv("COLUMNS");
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value <= 0) return 0;
  return static_cast<int>(std::clamp(value, 20L, 10000L));
}

// The state of an OpenFittedStream: where lines go, and the line not yet ended.
struct FittedStream {
  std::FILE* out;
  int width;
  std::string pending;
};

ssize_t WriteFitted(void* cookie, const char* data, std::size_t size) {
  auto* stream = static_cast<FittedStream*>(cookie);
  stream->pending.append(data, size);
  const std::size_t end = stream->pending.rfind('\n');
  if (end != std::string::npos) {
    std::fputs(WrapLines(stream->pending.substr(0, end + 1), stream->width).c_str(), stream->out);
    stream->pending.erase(0, end + 1);
    std::fflush(stream->out);
  }
  return static_cast<ssize_t>(size);
}

int CloseFitted(void* cookie) {
  auto* stream = static_cast<FittedStream*>(cookie);
  if (!stream->pending.empty()) std::fputs(WrapLines(stream->pending, stream->width).c_str(), stream->out);
  std::fflush(stream->out);
  delete stream;
  return 0;
}

}  // namespace

std::FILE* OpenFittedStream(std::FILE* out, int width) {
  auto* stream = new FittedStream{out, width, {}};
  std::FILE* file = fopencookie(stream, "w", cookie_io_functions_t{nullptr, WriteFitted, nullptr, CloseFitted});
  if (file == nullptr) {
    delete stream;
    return nullptr;
  }
  std::setvbuf(file, nullptr, _IONBF, 0);  // every write reaches WriteFitted at once
  return file;
}

std::string FitLine(const std::string& line, int width) {
  if (width <= 0 || VisibleWidth(line) <= static_cast<std::size_t>(width)) return line;
  // The longest prefix that ends before a space and fits (spacing inside kept).
  std::size_t cut = std::string::npos;
  for (std::size_t i = line.find(' '); i != std::string::npos; i = line.find(' ', i + 1)) {
    if (VisibleWidth(std::string_view(line).substr(0, i)) > static_cast<std::size_t>(width)) break;
    cut = i;
  }
  if (cut == std::string::npos) return line.substr(0, line.find(' '));
  std::string fitted = line.substr(0, cut);
  fitted.erase(fitted.find_last_not_of(' ') + 1);
  return fitted;
}

int TerminalColumns() {
  if (const int columns = ColumnsVariable(); columns > 0) return columns;
  winsize size{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0)
    return std::max(20, static_cast<int>(size.ws_col));
  return 80;
}

int FitWidth() { return ColumnsVariable() > 0 || isatty(STDOUT_FILENO) ? TerminalColumns() : 0; }

StatusOr<ColorMode> ParseColorMode(const std::string& text) {
  if (text == "auto") return ColorMode::kAuto;
  if (text == "always") return ColorMode::kAlways;
  if (text == "never") return ColorMode::kNever;
  return Status::InvalidArgument("--color must be auto, always or never, got '" + text + "'");
}

bool UseColor(ColorMode mode) {
  if (mode != ColorMode::kAuto) return mode == ColorMode::kAlways;
  const char* no_color = std::getenv("NO_COLOR");
  return isatty(STDOUT_FILENO) && (no_color == nullptr || *no_color == '\0');
}

void AddColorFlag(boost::program_options::options_description& options, std::string* value) {
  options.add_options()("color", boost::program_options::value(value)->default_value("auto"),
                        "colour PASS (green), FAIL (red) and the pitfall a scenario expects (yellow): auto (on a "
                        "terminal, unless NO_COLOR is set), always or never");
}

StatusOr<bool> ColorFromFlag(const std::string& value) {
  DTLAB_ASSIGN_OR_RETURN(const ColorMode mode, ParseColorMode(value));
  return UseColor(mode);
}

}  // namespace dtlab::cli
