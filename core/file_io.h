// File I/O at dtlab's edge: the one home for reading files that come from the
// user (checkpoints, pointer files, scenario, lesson and record files, data sets)
// and for writing output files (docs/reliability.md, "Hostile files and paths").
//
// Reading. Nothing read is trusted: OpenRegularFile and ReadRegularFile open with
// O_NONBLOCK (a FIFO never blocks the open), refuse anything that is not a
// regular file after following symlinks (a FIFO, a character or block device, a
// directory, a socket) and refuse a file larger than the caller's limit before
// reading a byte of it, then read no more than that limit even if the file grows.
//
// Writing. WriteFileAtomically replaces a regular file (or creates a new one) by
// temp + fsync + rename in the file's own directory. A symlink is written
// through: the file it points to is replaced and the link survives. Any other
// target (a device, a FIFO, a directory, a socket) is refused with
// InvalidArgument naming the path and what it is; dtlab never writes into it and
// never replaces it. The temporary file is created with O_EXCL, so a stale
// temporary file or a symlink planted at its name is never followed or reused.
//
// Thread safety: every function is thread-safe; concurrent WriteFileAtomically
// calls for the same path each write a complete file, the last rename wins.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "core/status.h"

namespace dtlab {

/// Limits for reading untrusted files (docs/reliability.md). A checkpoint holds
/// weights and optimizer state: 4 GiB is far above any model dtlab builds.
inline constexpr std::size_t kMaxCheckpointBytes = std::size_t{4} << 30;
/// Scenario, lesson, replay record, pointer and TF_CONFIG files are short text.
inline constexpr std::size_t kMaxTextFileBytes = std::size_t{16} << 20;
/// An IDX data set file as stored (gzip'd or plain); Fashion-MNIST's largest is
/// 26 MB gzip'd, 47 MB plain. Above a plain file of the largest payload the IDX
/// reader accepts (kMaxIdxPayloadBytes, 2 GiB, plus its header); its contents are
/// bounded again by that header.
inline constexpr std::size_t kMaxDatasetFileBytes = std::size_t{4} << 30;

/// An owned file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();
  int get() const { return fd_; }
  /// Gives up ownership: the caller closes the descriptor.
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

/// What a file of mode `st_mode` is, as a phrase: "a regular file", "a FIFO",
/// "a character device", "a block device", "a directory", "a socket", "a symlink".
std::string FileTypePhrase(unsigned st_mode);

/// Opens `path` for reading, following symlinks, without blocking on a FIFO.
/// `what` names the file in messages ("checkpoint", "scenario file", ...).
/// Errors: NotFound "<what> <path> does not exist"; InvalidArgument when it is
/// not a regular file ("... is a FIFO, not a regular file") or is larger than
/// `max_bytes` (the limit is named); IOError for any other refusal of the
/// operating system (a symlink loop, a permission), naming the system error.
StatusOr<UniqueFd> OpenRegularFile(const std::string& path, std::size_t max_bytes, std::string_view what);

/// The whole contents of `path`, opened as by OpenRegularFile; never more than
/// `max_bytes` are read (InvalidArgument if the file grew past the limit).
StatusOr<std::string> ReadRegularFile(const std::string& path, std::size_t max_bytes, std::string_view what);

/// The file an output written to `path` lands in: `path` itself when it does not
/// exist or is a regular file; for a symlink (a chain of them), the file it
/// finally points to (which may not exist yet). InvalidArgument naming `what`,
/// the path and what it is when that is anything else (a device, a FIFO, a
/// directory, a socket) or a symlink loop; IOError when it cannot be examined.
StatusOr<std::string> ResolveOutputPath(const std::string& path, std::string_view what);

/// Checks before a long computation that an output can later be written to
/// `path` (ResolveOutputPath, and the directory it lands in exists and is
/// writable). IOError "cannot write <what> <path>: ..." otherwise.
Status CheckOutputPath(const std::string& path, std::string_view what);

/// Checks before a long computation that AppendToRegularFile can later append to
/// `path`: it does not exist yet, or it is (a symlink to) a regular file.
/// InvalidArgument naming what it is otherwise; IOError for a symlink loop or
/// when it cannot be examined.
Status CheckAppendPath(const std::string& path, std::string_view what);

/// Replaces the file at `path` (resolved by ResolveOutputPath: a symlink is
/// written through) with `bytes`, so that it always holds either the old or the
/// complete new contents, even across a crash: creates
/// `<file>.tmp-<pid>.<n>` in the same directory with O_EXCL (another n when
/// that name is taken), writes and fsyncs it, renames it over the file, then
/// fsyncs the directory. On failure removes the temporary file and returns
/// IOError naming the path and the system error (InvalidArgument from
/// ResolveOutputPath).
Status WriteFileAtomically(const std::string& path, std::string_view bytes);

/// Appends `bytes` to the regular file at `path` (created when missing; a
/// symlink is followed), without blocking on a FIFO. `*was_empty` (if not null)
/// says whether the file was empty before, e.g. to write a CSV header first.
/// InvalidArgument when the path is not a regular file; IOError otherwise.
Status AppendToRegularFile(const std::string& path, std::string_view bytes, std::string_view what,
                           bool* was_empty = nullptr);

/// An exclusive advisory lock (flock) on a lock file, held until destruction:
/// the one-writer rule of a checkpoint directory (core/checkpoint_manager.h).
class ExclusiveFileLock {
 public:
  /// Creates or opens `lock_path` (never through a symlink), takes the lock
  /// without waiting and writes "pid <pid> on <host>" into it. When another
  /// process holds it: InvalidArgument "<what> is in use by pid N on HOST (lock
  /// file PATH); ...". On a file system without flock the lock is skipped.
  static StatusOr<ExclusiveFileLock> Acquire(const std::string& lock_path, std::string_view what);

  ExclusiveFileLock(ExclusiveFileLock&&) = default;
  ExclusiveFileLock& operator=(ExclusiveFileLock&&) = default;

 private:
  explicit ExclusiveFileLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace dtlab
