#include "core/file_io.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

namespace dtlab {

namespace {

std::string ErrnoText(int error) { return std::strerror(error); }

// The Linux limit on symlinks followed while resolving one path (MAXSYMLINKS).
constexpr int kMaxSymlinkHops = 40;

std::string MiB(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

std::string DirectoryOf(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool WriteAll(int fd, std::string_view bytes) {
  const char* data = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t written = ::write(fd, data, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += written;
    left -= static_cast<std::size_t>(written);
  }
  return true;
}

// "<what> <path>" or "<what> <path> (which points to <target>)".
std::string Named(std::string_view what, const std::string& path, const std::string& target) {
  std::string text = std::string(what) + " " + path;
  if (target != path) text += " (which points to " + target + ")";
  return text;
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

std::string FileTypePhrase(unsigned st_mode) {
  switch (st_mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFIFO:
      return "a FIFO";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    case S_IFDIR:
      return "a directory";
    case S_IFSOCK:
      return "a socket";
    case S_IFLNK:
      return "a symlink";
    default:
      return "not a regular file";
  }
}

namespace {

// The error for a file to append to that is a symlink loop.
Status AppendLoop(const std::string& named) {
  return Status::IOError("cannot append to " + named +
                         ": too many levels of symbolic links (a symlink loop?); remove it or make it a regular file");
}

}  // namespace

StatusOr<UniqueFd> OpenRegularFile(const std::string& path, std::size_t max_bytes, std::string_view what) {
  const std::string named = std::string(what) + " " + path;
  // O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for
  // a writer; it is refused below. It changes nothing for a regular file.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) {
    const int error = errno;
    if (error == ENOENT) return Status::NotFound(named + " does not exist");
    if (error == ELOOP) {
      return Status::IOError(named +
                             ": cannot open: too many levels of symbolic links (a symlink loop?); "
                             "make it a regular file");
    }
    return Status::IOError(named + ": cannot open: " + ErrnoText(error));
  }
  struct stat info;
  if (::fstat(fd.get(), &info) != 0) return Status::IOError(named + ": cannot stat: " + ErrnoText(errno));
  if (!S_ISREG(info.st_mode)) {
    return Status::InvalidArgument(named + " is " + FileTypePhrase(info.st_mode) +
                                   ", not a regular file; give the path of a regular file");
  }
  if (info.st_size < 0 || static_cast<std::uint64_t>(info.st_size) > max_bytes) {
    return Status::InvalidArgument(named + " is " + std::to_string(info.st_size) + " bytes, more than the limit of " +
                                   std::to_string(max_bytes) + " bytes (" + MiB(max_bytes) + ") for a " +
                                   std::string(what) + "; is it the right file?");
  }
  // Reads block as usual from here on.
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0) (void)::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

StatusOr<std::string> ReadRegularFile(const std::string& path, std::size_t max_bytes, std::string_view what) {
  DTLAB_ASSIGN_OR_RETURN(UniqueFd fd, OpenRegularFile(path, max_bytes, what));
  struct stat info;
  std::string bytes;
  if (::fstat(fd.get(), &info) == 0 && info.st_size > 0) bytes.reserve(static_cast<std::size_t>(info.st_size));
  char buffer[1 << 16];
  while (true) {
    // One byte more than the limit may be read: that is how growth past it shows.
    const std::size_t room = max_bytes - std::min(max_bytes, bytes.size()) + 1;
    const ssize_t got = ::read(fd.get(), buffer, std::min(sizeof(buffer), room));
    if (got < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(std::string(what) + " " + path + ": cannot read: " + ErrnoText(errno));
    }
    if (got == 0) break;
    bytes.append(buffer, static_cast<std::size_t>(got));
    if (bytes.size() > max_bytes) {
      return Status::InvalidArgument(std::string(what) + " " + path + " grew past the limit of " +
                                     std::to_string(max_bytes) + " bytes (" + MiB(max_bytes) + ") while being read");
    }
  }
  return bytes;
}

StatusOr<std::string> ResolveOutputPath(const std::string& path, std::string_view what) {
  std::string current = path;
  for (int hop = 0; hop <= kMaxSymlinkHops; ++hop) {
    struct stat info;
    if (::lstat(current.c_str(), &info) != 0) {
      const int error = errno;
      if (error == ENOENT) return current;  // a new file (or the missing target of a symlink)
      return Status::IOError("cannot write " + Named(what, path, current) + ": " + ErrnoText(error));
    }
    if (S_ISREG(info.st_mode)) return current;
    if (!S_ISLNK(info.st_mode)) {
      return Status::InvalidArgument(
          Named(what, path, current) + " is " + FileTypePhrase(info.st_mode) +
          ", not a regular file: dtlab writes an output by replacing a regular file atomically, and never writes "
          "into or replaces a device, FIFO, socket or directory; give the path of a regular file (or a new one)");
    }
    char target[PATH_MAX];
    const ssize_t length = ::readlink(current.c_str(), target, sizeof(target) - 1);
    if (length < 0) return Status::IOError("cannot write " + Named(what, path, current) + ": " + ErrnoText(errno));
    const std::string link(target, static_cast<std::size_t>(length));
    current = !link.empty() && link.front() == '/' ? link : DirectoryOf(current) + "/" + link;
  }
  return Status::InvalidArgument(std::string(what) + " " + path +
                                 ": too many levels of symbolic links (a symlink loop?); point it at a regular file");
}

Status CheckOutputPath(const std::string& path, std::string_view what) {
  DTLAB_ASSIGN_OR_RETURN(const std::string target, ResolveOutputPath(path, what));
  const std::string directory = DirectoryOf(target);
  struct stat info;
  if (::stat(directory.c_str(), &info) != 0) {
    return Status::IOError("cannot write " + Named(what, path, target) + ": directory " + directory + ": " +
                           ErrnoText(errno));
  }
  if (!S_ISDIR(info.st_mode)) {
    return Status::IOError("cannot write " + Named(what, path, target) + ": " + directory + " is " +
                           FileTypePhrase(info.st_mode) + ", not a directory");
  }
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    return Status::IOError("cannot write " + Named(what, path, target) + ": directory " + directory + ": " +
                           ErrnoText(errno));
  }
  return Status::Ok();
}

Status CheckAppendPath(const std::string& path, std::string_view what) {
  const std::string named = std::string(what) + " " + path;
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    const int error = errno;
    if (error == ENOENT) return Status::Ok();  // created by the first append
    if (error == ELOOP) return AppendLoop(named);
    return Status::IOError("cannot append to " + named + ": " + ErrnoText(error));
  }
  if (!S_ISREG(info.st_mode)) {
    return Status::InvalidArgument(named + " is " + FileTypePhrase(info.st_mode) +
                                   ", not a regular file; remove it or make it a regular file");
  }
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  DTLAB_ASSIGN_OR_RETURN(const std::string target, ResolveOutputPath(path, "output file"));
  // A name no other writer uses: this process's id and a counter; O_EXCL
  // refuses a name that exists (a stale temporary file, or a symlink planted
  // there, which is not followed), and the next number is tried.
  static std::atomic<unsigned> counter{0};
  std::string temporary;
  UniqueFd fd;
  for (int attempt = 0; attempt < 100 && fd.get() < 0; ++attempt) {
    temporary = target + ".tmp-" + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
    fd = UniqueFd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd.get() < 0 && errno != EEXIST) break;
  }
  if (fd.get() < 0) return Status::IOError(path + ": cannot create " + temporary + ": " + ErrnoText(errno));
  auto fail = [&](const std::string& action) {
    const std::string error = ErrnoText(errno);
    ::unlink(temporary.c_str());
    return Status::IOError(path + ": " + action + ": " + error);
  };
  if (!WriteAll(fd.get(), bytes)) return fail("cannot write " + temporary);
  if (::fsync(fd.get()) != 0) return fail("cannot fsync " + temporary);
  if (::close(fd.release()) != 0) return fail("cannot close " + temporary);
  if (::rename(temporary.c_str(), target.c_str()) != 0) return fail("cannot rename " + temporary);

  // Make the rename itself durable.
  const std::string directory = DirectoryOf(target);
  UniqueFd dir_fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() < 0) return Status::IOError(path + ": cannot open directory to fsync: " + ErrnoText(errno));
  if (::fsync(dir_fd.get()) != 0) {
    return Status::IOError(path + ": cannot fsync directory " + directory + ": " + ErrnoText(errno));
  }
  return Status::Ok();
}

Status AppendToRegularFile(const std::string& path, std::string_view bytes, std::string_view what, bool* was_empty) {
  const std::string named = std::string(what) + " " + path;
  // O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) instead of waiting.
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644));
  if (fd.get() < 0) {
    const int error = errno;
    if (error == ELOOP) return AppendLoop(named);
    if (error == ENXIO) {
      return Status::InvalidArgument(named + " is a FIFO or a device, not a regular file; remove it");
    }
    return Status::IOError("cannot append to " + named + ": " + ErrnoText(error));
  }
  struct stat info;
  if (::fstat(fd.get(), &info) != 0) return Status::IOError("cannot append to " + named + ": " + ErrnoText(errno));
  if (!S_ISREG(info.st_mode)) {
    return Status::InvalidArgument(named + " is " + FileTypePhrase(info.st_mode) +
                                   ", not a regular file; remove it or make it a regular file");
  }
  if (was_empty != nullptr) *was_empty = info.st_size == 0;
  if (!WriteAll(fd.get(), bytes)) return Status::IOError("cannot write " + named + ": " + ErrnoText(errno));
  if (::close(fd.release()) != 0) return Status::IOError("cannot write " + named + ": " + ErrnoText(errno));
  return Status::Ok();
}

StatusOr<ExclusiveFileLock> ExclusiveFileLock::Acquire(const std::string& lock_path, std::string_view what) {
  UniqueFd fd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644));
  if (fd.get() < 0) {
    const int error = errno;
    if (error == ELOOP) {
      return Status::InvalidArgument("lock file " + lock_path + " is a symlink; remove it (dtlab recreates it)");
    }
    return Status::IOError("cannot create lock file " + lock_path + ": " + ErrnoText(error));
  }
  struct stat info;
  if (::fstat(fd.get(), &info) != 0) return Status::IOError("lock file " + lock_path + ": " + ErrnoText(errno));
  if (!S_ISREG(info.st_mode)) {
    return Status::InvalidArgument("lock file " + lock_path + " is " + FileTypePhrase(info.st_mode) +
                                   ", not a regular file; remove it (dtlab recreates it)");
  }
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error == ENOLCK || error == EOPNOTSUPP || error == ENOSYS) return ExclusiveFileLock(UniqueFd());
    if (error != EWOULDBLOCK) return Status::IOError("cannot lock " + lock_path + ": " + ErrnoText(error));
    char holder[256];
    const ssize_t got = ::pread(fd.get(), holder, sizeof(holder) - 1, 0);
    std::string text = got > 0 ? std::string(holder, static_cast<std::size_t>(got)) : std::string();
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    for (char& c : text)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    if (text.empty()) text = "another process";
    return Status::InvalidArgument(std::string(what) + " is in use by " + text + " (lock file " + lock_path +
                                   "); only one training may write a checkpoint directory at a time: wait for "
                                   "that one to finish, or give this one another directory");
  }
  char host[256] = "unknown host";
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown host");
  host[sizeof(host) - 1] = '\0';
  const std::string holder = "pid " + std::to_string(::getpid()) + " on " + host + "\n";
  if (::ftruncate(fd.get(), 0) != 0 || ::pwrite(fd.get(), holder.data(), holder.size(), 0) < 0) {
    return Status::IOError("cannot write lock file " + lock_path + ": " + ErrnoText(errno));
  }
  return ExclusiveFileLock(std::move(fd));
}

}  // namespace dtlab
