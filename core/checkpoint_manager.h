// CheckpointManager: numbered safetensors checkpoints in one directory, like
// tf.train.CheckpointManager.
//
// The directory holds `ckpt-<number>.safetensors` files and a pointer file
// `checkpoint` in TensorFlow's text format:
//
//   model_checkpoint_path: "ckpt-7.safetensors"
//   all_model_checkpoint_paths: "ckpt-5.safetensors"
//   all_model_checkpoint_paths: "ckpt-6.safetensors"
//   all_model_checkpoint_paths: "ckpt-7.safetensors"
//
// The first line names the latest checkpoint; the others list every kept one,
// oldest (first saved) first. Paths are relative to the directory.
//
// Crash safety: Save writes the checkpoint atomically, then the pointer file
// atomically, then deletes old checkpoints, so at every moment the pointer names
// a complete file whose checksums verify. Leftover `*.tmp-*` files of a crashed
// save are ignored and removed by the next Save.
//
// One writer: a training holds LockForWriting()'s lock (flock on the file
// `.dtlab.lock` in the directory, which names its holder) for as long as it may
// save, so a second training into the same directory is refused instead of
// sweeping away the first one's temporary files. Readers (eval, resume) take no
// lock. The lock file is neither a checkpoint nor a temporary file: Save keeps it.
//
// Thread safety: the const methods may run concurrently with each other. Save
// must not run concurrently with anything else on the same directory, from this
// or another manager or process; LockForWriting makes other processes wait.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "core/safetensors.h"
#include "core/status.h"

namespace dtlab {

class CheckpointManager {
 public:
  /// Manages `directory` (created by the first Save). `max_to_keep` >= 1 keeps
  /// that many most recent checkpoints; 0 keeps all. Nothing is touched on disk
  /// until a method is called.
  CheckpointManager(std::string directory, int max_to_keep);

  /// Writes `checkpoint` as checkpoint `number` (>= 0), makes it the latest and
  /// deletes the oldest checkpoints beyond max_to_keep. Saving a number that is
  /// already kept replaces that file and makes it the latest. On success stores
  /// the written file's path in `*saved_path` when not null. InvalidArgument for
  /// a negative number or max_to_keep; IOError when the directory or a file
  /// cannot be written or an old checkpoint cannot be deleted (the new
  /// checkpoint is saved and pointed to in that last case).
  Status Save(const SafetensorsFile& checkpoint, std::int64_t number, std::string* saved_path = nullptr);

  /// Creates the directory if needed and takes its writer lock, held until the
  /// returned object is destroyed. InvalidArgument naming the holder ("pid N on
  /// HOST") when another process holds it; IOError when it cannot be created.
  StatusOr<ExclusiveFileLock> LockForWriting() const;

  /// The path of the latest checkpoint, or nullopt when there is no pointer file
  /// (no checkpoint was saved yet). Corruption if the pointer file is malformed
  /// or names a file that does not exist; IOError if it cannot be read.
  StatusOr<std::optional<std::string>> LatestPath() const;

  /// Reads and verifies the latest checkpoint. NotFound ("no checkpoint in DIR")
  /// if the directory or pointer file is missing; the errors of LatestPath; and
  /// the errors of ReadSafetensorsFile (e.g. Corruption on a checksum mismatch).
  StatusOr<SafetensorsFile> RestoreLatest() const;

  /// The paths of all kept checkpoints, oldest first; empty when there is no
  /// pointer file. Corruption if the pointer file is malformed.
  StatusOr<std::vector<std::string>> List() const;

  const std::string& directory() const { return directory_; }
  int max_to_keep() const { return max_to_keep_; }

 private:
  // What the pointer file says: the latest and the kept file names, oldest first.
  struct Pointer {
    std::string latest;
    std::vector<std::string> kept;
  };

  std::string PointerPath() const;
  std::string PathOf(const std::string& file_name) const;
  // nullopt when the pointer file does not exist.
  StatusOr<std::optional<Pointer>> ReadPointer() const;
  // The kept list for Save: the pointer's list if it is readable, otherwise the
  // checkpoint files found in the directory, by number; plus orphaned files
  // (written by a save that crashed before updating the pointer) as oldest.
  std::vector<std::string> KeptForSave() const;
  // Removes leftover temporary files of crashed saves.
  void RemoveStaleTemporaryFiles() const;

  std::string directory_;
  int max_to_keep_;
};

}  // namespace dtlab
