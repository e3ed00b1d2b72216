// Status and StatusOr: how every module of dtlab reports failure.
//
// A Status is cheap when OK. Its code decides the process exit code at the command
// line (docs/architecture.md, "The command"): kInvalidArgument, kNotFound and kCorruption are
// usage or input errors (exit 2); kIOError is an input error too (exit 2), and
// kRuntime is a runtime fault (exit 3). Library code never calls exit(); it returns
// a Status and lets cli/ decide.
//
// Thread safety: a Status is a value; distinct objects may be used concurrently.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace dtlab {

class Status {
 public:
  enum class Code { kOk = 0, kInvalidArgument, kNotFound, kCorruption, kIOError, kRuntime };

  Status() = default;
  static Status Ok() { return Status(); }
  /// A bad argument or option value: what was wrong and how to fix it.
  static Status InvalidArgument(std::string message) { return {Code::kInvalidArgument, std::move(message)}; }
  /// Something named by the user does not exist (file, model, data set).
  static Status NotFound(std::string message) { return {Code::kNotFound, std::move(message)}; }
  /// A file exists but its contents are malformed or fail verification.
  static Status Corruption(std::string message) { return {Code::kCorruption, std::move(message)}; }
  /// The operating system refused a read, write or rename.
  static Status IOError(std::string message) { return {Code::kIOError, std::move(message)}; }
  /// A fault while computing (non-finite values, a failed replica, a timeout).
  static Status Runtime(std::string message) { return {Code::kRuntime, std::move(message)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "invalid argument: <message>" and so on; "OK" when ok().
  std::string ToString() const;
  /// Returns a copy whose message is prefixed with `context: `.
  Status WithContext(const std::string& context) const;

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

/// The process exit code for a status (docs/architecture.md, "The command"): 0 ok, 2 usage/input, 3 runtime.
int ExitCodeFor(const Status& status);

/// Either a value or a non-OK Status.
template <typename T>
class StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  StatusOr(Status status) : v_(std::move(status)) {}  // NOLINT: REQUIRES: !status.ok()
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace dtlab

#define DTLAB_CONCAT_INNER(a, b) a##b
#define DTLAB_CONCAT(a, b) DTLAB_CONCAT_INNER(a, b)

/// Returns from the enclosing function if `expr` yields a non-OK Status.
#define DTLAB_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::dtlab::Status dtlab_status_ = (expr);        \
    if (!dtlab_status_.ok()) return dtlab_status_; \
  } while (0)

/// `DTLAB_ASSIGN_OR_RETURN(auto x, MakeX());` binds the value or returns the error.
#define DTLAB_ASSIGN_OR_RETURN(lhs, expr) \
  DTLAB_ASSIGN_OR_RETURN_IMPL(DTLAB_CONCAT(dtlab_statusor_, __LINE__), lhs, expr)
#define DTLAB_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
