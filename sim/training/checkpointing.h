// RunCheckpoints: a training run's checkpoints (--checkpoint-dir, the tutorial's
// CheckpointManager), its tf.keras.callbacks.BackupAndRestore backup
// (--backup-dir), its metrics.csv, and the resume from either (docs/checkpoints.md,
// docs/training.md).
//
// Multi-worker (sim/comm/worker_group.h): the chief (rank 0) writes the real
// directories; every other worker writes its copy to workertemp_RANK and deletes
// it (the multi-worker tutorial's write_filepath), and none goes on before all
// have saved. Every worker reads the chief's directories, so they must be on a
// file system all machines share; Open makes the workers agree where they resume.
//
// Thread safety: not thread-safe; the training loop drives it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint_manager.h"
#include "core/file_io.h"
#include "core/model.h"
#include "core/status.h"
#include "core/training_state.h"
#include "sim/training/trainer.h"
#include "sim/engines/training_engine.h"

namespace dtlab {

/// The settings a checkpoint records in its metadata (dtlab.* keys; docs/checkpoints.md).
std::map<std::string, std::string> RecordedSettings(const TrainConfig& config);

class RunCheckpoints {
 public:
  /// `config`, `model`, `state` and `report` must outlive this object.
  RunCheckpoints(const TrainConfig& config, const Sequential<float>& model, const std::string& dataset_name,
                 TrainingState& state, TrainReport& report);
  RunCheckpoints(const RunCheckpoints&) = delete;
  RunCheckpoints& operator=(const RunCheckpoints&) = delete;

  /// Creates the directories and restores into the state the latest backup, else
  /// the latest checkpoint of --checkpoint-dir, after checking it fits the run's
  /// model and optimizer (report.resume says what carried over and what changed);
  /// then takes the writer locks (the chief) and makes every worker agree where
  /// to resume. `epoch_examples`: examples in one epoch of the training set.
  /// Errors as Train's (sim/training/trainer.h).
  Status Open(std::int64_t epoch_examples);

  /// True on the process that writes the real directories and reports.
  bool chief() const { return chief_; }

  /// After an optimizer step, with state.step and state.step_in_epoch counting
  /// it: saves at --checkpoint-every and backs up at --backup-every.
  Status AfterStep(TrainingEngine& engine, TrainObserver& observer);
  /// After epoch state.epoch (0-based) ended and the next one was set to start
  /// afresh: the tutorial's checkpoint after every 2nd epoch, and the backup of
  /// a run without --backup-every.
  Status AfterEpoch(TrainingEngine& engine, TrainObserver& observer);
  /// Appends the epoch's line to --checkpoint-dir's metrics.csv (the chief).
  Status AppendMetrics(const EpochReport& epoch) const;
  /// When training ended normally: saves the final state unless the last step
  /// was just saved, so that eval and resume see the trained model, then deletes
  /// the backup (BackupAndRestore's rule).
  Status Finish(TrainingEngine& engine, TrainObserver& observer);
  /// When training stopped early on a request (TrainConfig::stop_request): saves
  /// the state where it stopped unless that step was just saved, and backs it up,
  /// keeping the backup, so that rerunning the same command resumes there.
  Status Stopped(TrainingEngine& engine, TrainObserver& observer);

 private:
  Status Restore(CheckpointManager& manager, const char* option, std::int64_t epoch_examples);
  Status CheckResumePosition(const std::string& where, const ResumeReport& resume) const;
  Status SaveInto(CheckpointManager& manager, const std::string& worker_temp, std::int64_t number,
                  TrainingEngine& engine, std::string* path);
  Status Save(TrainingEngine& engine, TrainObserver& observer);
  Status SaveBackup(TrainingEngine& engine);

  const TrainConfig& config_;
  const Sequential<float>& model_;
  TrainingState& state_;
  TrainReport& report_;
  std::map<std::string, std::string> recorded_;  // the metadata every checkpoint carries
  WorkerGroup* group_;                           // not owned; null in a single-process run
  bool chief_;
  std::string backup_chief_dir_;  // backup_dir/chief, or empty
  std::optional<CheckpointManager> manager_, backup_;
  std::vector<ExclusiveFileLock> writer_locks_;
  std::int64_t last_saved_step_ = -1;
};

}  // namespace dtlab
