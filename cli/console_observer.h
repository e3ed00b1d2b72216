// ConsoleObserver: what dtlab train prints while it trains. The tutorial's lines
// ("Learning rate for epoch N", "Epoch N, Loss: ...", saved checkpoints) go to
// `out`; on a terminal a progress line on stderr, redrawn in place: the epoch's
// bar ("Epoch 1/10 [...] 201/938"), or the run's when --steps ends it before its
// epochs do ("Step 201/300 [...]"), with the steps per second and the time left.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "sim/training/trainer.h"

namespace dtlab::cli {

class ConsoleObserver final : public TrainObserver {
 public:
  /// `last_step`: the step the run ends on when --steps ends it before its epochs
  /// (the progress then counts the run's steps), else 0 (it counts the epoch's).
  ConsoleObserver(std::FILE* out, bool progress_bar, std::int64_t epochs, std::int64_t last_step)
      : out_(out), progress_bar_(progress_bar), epochs_(epochs), last_step_(last_step) {}
  /// Gradient accumulation: the counts are optimizer steps of `micro_batches`
  /// micro-batches of `global_batch`, which the progress line says after them
  /// ("30/235 steps of 4x64"). Without it (1), the line is as it was.
  void set_accumulation(std::int64_t micro_batches, std::int64_t global_batch) {
    if (micro_batches > 1)
      step_unit_ = " steps of " + std::to_string(micro_batches) + "x" + std::to_string(global_batch);
  }

  void OnStart(const std::string& summary, std::int64_t resumed_from_step) override;
  void OnResume(const ResumeReport& resume) override;
  void OnInput(const std::string& description) override;
  void OnEpochBegin(std::int64_t epoch, float learning_rate, std::int64_t steps_in_epoch) override;
  void OnStep(std::int64_t step, std::int64_t steps, float loss, float accuracy) override;
  void OnEvaluating() override;
  void OnEpochEnd(const EpochReport& r) override;
  void OnReferenceFailure(const StepCheck& check) override;
  void OnTrainStep(const StepRecord& record) override;
  void OnCheckpoint(const std::string& path) override;

 private:
  using Clock = std::chrono::steady_clock;
  void ClearLine() const;

  std::FILE* out_;
  bool progress_bar_;
  bool reported_failure_ = false;
  std::int64_t epochs_, last_step_, epoch_ = 0;
  std::int64_t run_step_ = 0;           // optimizer steps (or updates) of the run so far
  std::int64_t epoch_first_step_ = -1;  // the epoch's step count at its first step seen here
  std::string step_unit_;               // after the counts: " steps of KxG" with gradient accumulation
  Clock::time_point epoch_start_, last_draw_;
};

/// "8s", "1m05s", "2h03m": a time left, to the second.
std::string FormatTimeLeft(double seconds);

}  // namespace dtlab::cli
