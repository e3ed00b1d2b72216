#include "core/checkpoint_manager.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "core/text.h"

namespace dtlab {

namespace {

constexpr std::string_view kPointerFileName = "checkpoint";
constexpr std::string_view kLockFileName = ".dtlab.lock";
constexpr std::string_view kFilePrefix = "ckpt-";
constexpr std::string_view kFileSuffix = ".safetensors";
constexpr std::string_view kLatestField = "model_checkpoint_path";
constexpr std::string_view kKeptField = "all_model_checkpoint_paths";

std::string FileNameFor(std::int64_t number) {
  return std::string(kFilePrefix) + std::to_string(number) + std::string(kFileSuffix);
}

// Whether `name` is "ckpt-<digits>.safetensors"; stores the number if so.
bool ParseCheckpointFileName(std::string_view name, std::int64_t* number) {
  if (name.size() <= kFilePrefix.size() + kFileSuffix.size() || !name.starts_with(kFilePrefix) ||
      !name.ends_with(kFileSuffix)) {
    return false;
  }
  const std::string_view digits =
      name.substr(kFilePrefix.size(), name.size() - kFilePrefix.size() - kFileSuffix.size());
  std::int64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, c - '0', &value)) {
      return false;
    }
  }
  *number = value;
  return true;
}

// The contents of `path`, nullopt if it does not exist; ReadRegularFile's errors
// otherwise (a FIFO or a device is refused, never read until memory runs out).
StatusOr<std::optional<std::string>> ReadTextFile(const std::string& path) {
  StatusOr<std::string> text = ReadRegularFile(path, kMaxTextFileBytes, "checkpoint pointer file");
  if (text.status().code() == Status::Code::kNotFound) return std::optional<std::string>();
  if (!text.ok()) return text.status();
  return std::optional<std::string>(std::move(text).value());
}

}  // namespace

CheckpointManager::CheckpointManager(std::string directory, int max_to_keep)
    : directory_(std::move(directory)), max_to_keep_(max_to_keep) {}

std::string CheckpointManager::PathOf(const std::string& file_name) const {
  return (std::filesystem::path(directory_) / file_name).string();
}

std::string CheckpointManager::PointerPath() const { return PathOf(std::string(kPointerFileName)); }

StatusOr<ExclusiveFileLock> CheckpointManager::LockForWriting() const {
  std::error_code error;
  std::filesystem::create_directories(directory_, error);
  if (error) {
    return Status::IOError(directory_ + ": cannot create checkpoint directory: " + error.message());
  }
  return ExclusiveFileLock::Acquire(PathOf(std::string(kLockFileName)), "checkpoint directory " + directory_);
}

StatusOr<std::optional<CheckpointManager::Pointer>> CheckpointManager::ReadPointer() const {
  const std::string path = PointerPath();
  DTLAB_ASSIGN_OR_RETURN(std::optional<std::string> text, ReadTextFile(path));
  if (!text.has_value()) return std::optional<Pointer>();

  auto malformed = [&](int line_number, const std::string& why) {
    return Status::Corruption(path + ":" + std::to_string(line_number) + ": malformed checkpoint pointer file: " + why);
  };
  Pointer pointer;
  bool seen_latest = false;
  std::string_view rest = *text;
  int line_number = 0;
  while (!rest.empty()) {
    const std::size_t newline = rest.find('\n');
    const std::string_view line = Trim(newline == std::string_view::npos ? rest : rest.substr(0, newline));
    rest = newline == std::string_view::npos ? std::string_view() : rest.substr(newline + 1);
    ++line_number;
    if (line.empty()) continue;

    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) return malformed(line_number, "expected 'field: \"value\"'");
    const std::string_view field = Trim(line.substr(0, colon));
    const std::string_view value = Trim(line.substr(colon + 1));
    if (field == "all_model_checkpoint_timestamps" || field == "last_preserved_timestamp") {
      continue;  // written by TensorFlow; not used here
    }
    if (value.size() < 2 || value.front() != '"' || value.back() != '"') {
      return malformed(line_number, "the value is not a quoted string");
    }
    const std::string name(value.substr(1, value.size() - 2));
    std::int64_t number = 0;
    if (!ParseCheckpointFileName(name, &number)) {
      return malformed(line_number, "\"" + name + "\" is not a ckpt-<number>.safetensors name");
    }
    if (field == kLatestField) {
      if (seen_latest) return malformed(line_number, "model_checkpoint_path appears twice");
      if (!pointer.kept.empty()) {
        return malformed(line_number, "model_checkpoint_path must come first");
      }
      seen_latest = true;
      pointer.latest = name;
    } else if (field == kKeptField) {
      if (!seen_latest) return malformed(line_number, "model_checkpoint_path must come first");
      if (std::find(pointer.kept.begin(), pointer.kept.end(), name) == pointer.kept.end()) {
        pointer.kept.push_back(name);
      }
    } else {
      return malformed(line_number, "unknown field '" + std::string(field) + "'");
    }
  }
  if (!seen_latest) return malformed(line_number, "no model_checkpoint_path");
  if (std::find(pointer.kept.begin(), pointer.kept.end(), pointer.latest) == pointer.kept.end()) {
    pointer.kept.push_back(pointer.latest);
  }
  return std::optional<Pointer>(std::move(pointer));
}

StatusOr<std::optional<std::string>> CheckpointManager::LatestPath() const {
  DTLAB_ASSIGN_OR_RETURN(std::optional<Pointer> pointer, ReadPointer());
  if (!pointer.has_value()) return std::optional<std::string>();
  const std::string path = PathOf(pointer->latest);
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) {
      return Status::Corruption(PointerPath() + " names " + pointer->latest + ", which does not exist");
    }
    return Status::IOError(path + ": " + std::strerror(errno));
  }
  return std::optional<std::string>(path);
}

StatusOr<SafetensorsFile> CheckpointManager::RestoreLatest() const {
  DTLAB_ASSIGN_OR_RETURN(std::optional<std::string> path, LatestPath());
  if (!path.has_value()) return Status::NotFound("no checkpoint in " + directory_);
  StatusOr<SafetensorsFile> file = ReadSafetensorsFile(*path);
  if (file.status().code() == Status::Code::kNotFound) {  // deleted since LatestPath
    return Status::Corruption(PointerPath() + " names " + *path + ", which does not exist");
  }
  return file;
}

StatusOr<std::vector<std::string>> CheckpointManager::List() const {
  DTLAB_ASSIGN_OR_RETURN(std::optional<Pointer> pointer, ReadPointer());
  std::vector<std::string> paths;
  if (pointer.has_value()) {
    for (const std::string& name : pointer->kept) paths.push_back(PathOf(name));
  }
  return paths;
}

std::vector<std::string> CheckpointManager::KeptForSave() const {
  // Checkpoint files present in the directory, by number.
  std::vector<std::pair<std::int64_t, std::string>> on_disk;
  std::error_code error;
  for (std::filesystem::directory_iterator it(directory_, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    std::int64_t number = 0;
    if (ParseCheckpointFileName(name, &number)) on_disk.emplace_back(number, name);
  }
  std::sort(on_disk.begin(), on_disk.end());

  std::vector<std::string> listed;
  StatusOr<std::optional<Pointer>> pointer = ReadPointer();
  if (pointer.ok() && pointer->has_value()) listed = (*pointer)->kept;

  // Orphans (on disk, not listed) count as oldest; listed files that are gone are dropped.
  std::vector<std::string> kept;
  for (const auto& [number, name] : on_disk) {
    if (std::find(listed.begin(), listed.end(), name) == listed.end()) kept.push_back(name);
  }
  for (const std::string& name : listed) {
    const bool exists =
        std::any_of(on_disk.begin(), on_disk.end(), [&](const auto& file) { return file.second == name; });
    if (exists) kept.push_back(name);
  }
  return kept;
}

void CheckpointManager::RemoveStaleTemporaryFiles() const {
  std::vector<std::filesystem::path> stale;
  std::error_code error;
  for (std::filesystem::directory_iterator it(directory_, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    const std::size_t tmp = name.find(".tmp-");
    if (tmp == std::string::npos) continue;
    std::int64_t number = 0;
    const std::string base = name.substr(0, tmp);
    if (base == kPointerFileName || ParseCheckpointFileName(base, &number)) {
      stale.push_back(it->path());
    }
  }
  for (const auto& path : stale) std::filesystem::remove(path, error);  // best effort
}

Status CheckpointManager::Save(const SafetensorsFile& checkpoint, std::int64_t number, std::string* saved_path) {
  if (number < 0) {
    return Status::InvalidArgument("checkpoint number must be >= 0, got " + std::to_string(number));
  }
  if (max_to_keep_ < 0) {
    return Status::InvalidArgument("max_to_keep must be >= 1, or 0 to keep all; got " + std::to_string(max_to_keep_));
  }
  std::error_code error;
  std::filesystem::create_directories(directory_, error);
  if (error) {
    return Status::IOError(directory_ + ": cannot create checkpoint directory: " + error.message());
  }
  RemoveStaleTemporaryFiles();
  std::vector<std::string> kept = KeptForSave();

  // 1. The checkpoint itself.
  const std::string file_name = FileNameFor(number);
  const std::string path = PathOf(file_name);
  DTLAB_RETURN_IF_ERROR(WriteFileAtomically(path, SerializeSafetensors(checkpoint)));

  // 2. The pointer, naming it as the latest.
  kept.erase(std::remove(kept.begin(), kept.end(), file_name), kept.end());
  kept.push_back(file_name);
  std::vector<std::string> to_delete;
  if (max_to_keep_ > 0 && kept.size() > static_cast<std::size_t>(max_to_keep_)) {
    const auto excess = static_cast<std::ptrdiff_t>(kept.size()) - max_to_keep_;
    to_delete.assign(kept.begin(), kept.begin() + excess);
    kept.erase(kept.begin(), kept.begin() + excess);
  }
  std::string pointer_text = std::string(kLatestField) + ": \"" + file_name + "\"\n";
  for (const std::string& name : kept) {
    pointer_text += std::string(kKeptField) + ": \"" + name + "\"\n";
  }
  DTLAB_RETURN_IF_ERROR(WriteFileAtomically(PointerPath(), pointer_text));
  if (saved_path != nullptr) *saved_path = path;

  // 3. Old checkpoints, oldest first.
  Status result = Status::Ok();
  for (const std::string& name : to_delete) {
    const std::string old_path = PathOf(name);
    if (::unlink(old_path.c_str()) != 0 && errno != ENOENT && result.ok()) {
      result = Status::IOError("saved " + path + " but cannot delete old checkpoint " + old_path + ": " +
                               std::strerror(errno));
    }
  }
  return result;
}

}  // namespace dtlab
