#include "core/status.h"

namespace dtlab {

std::string Status::ToString() const {
  const char* prefix = "";
  switch (code_) {
    case Code::kOk:
      return "OK";
    case Code::kInvalidArgument:
      prefix = "invalid argument: ";
      break;
    case Code::kNotFound:
      prefix = "not found: ";
      break;
    case Code::kCorruption:
      prefix = "corrupt input: ";
      break;
    case Code::kIOError:
      prefix = "I/O error: ";
      break;
    case Code::kRuntime:
      prefix = "runtime fault: ";
      break;
  }
  return prefix + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case Status::Code::kOk:
      return 0;
    case Status::Code::kRuntime:
      return 3;
    default:
      return 2;
  }
}

}  // namespace dtlab
