// Runs a scenario (scenarios/scenario.h): every run in order, then every check,
// each giving a verdict that is compared with the one the file expects.
//
// A run that is refused (InvalidArgument, e.g. the SUM_OVER_BATCH_SIZE reduction)
// or stops with a runtime fault (a NaN loss) does not end the scenario: its status
// is kept for the `refused` and `fault` checks. Data sets are loaded once per
// source. Runs that checkpoint (resume_from) work in a temporary directory that is
// removed afterwards.
//
// Thread safety: RunScenario may be called from one thread at a time (oneTBB runs
// the replicas inside it).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "scenarios/scenario.h"

namespace dtlab {

/// One training step as a scenario report shows it.
struct StepMetrics {
  std::int64_t step = 0, epoch = 0;
  float loss = 0, mean_loss = 0, accuracy = 0;
  std::vector<std::int64_t> batch_sizes;  // per replica
  std::vector<float> replica_losses;      // per replica, scaled as the loss code says
  bool checked = false, passed = true;    // the reference check, when it ran
  std::int64_t max_ulp = 0;
  double distributed_norm = 0, reference_norm = 0;
  std::vector<double> compute_seconds;                      // per replica, simulated
  std::vector<std::pair<std::string, double>> collectives;  // name, simulated seconds
  double max_bound_fraction = 0;                            // the reference check's worst |d - r| / bound
  double max_example_weight = 0;                            // StepResult's (gradient accumulation)
  // With ScenarioRunOptions::record_digests: WeightsDigest of the reduced gradient
  // and of the variables after the step (dtlab replay compares them).
  std::uint64_t gradient_digest = 0, weights_digest = 0;
  std::vector<std::uint64_t> variable_gradient_digests;  // per variable, in model order
};

struct RunResult {
  std::string name;
  const ScenarioRun* run = nullptr;
  Status status;       // OK, or why the run was refused or stopped
  TrainReport report;  // valid when status is OK
  std::vector<StepMetrics> steps;
  std::vector<std::pair<std::string, double>> values;  // ScenarioValueNames(), in that order
  double Value(const std::string& name) const;         // NaN if absent
  bool refused() const { return status.code() == Status::Code::kInvalidArgument; }
  bool faulted() const { return status.code() == Status::Code::kRuntime; }
};

struct CheckVerdict {
  const ScenarioCheck* check = nullptr;
  std::string label;     // what was checked, in words
  std::string expected;  // the outcome the file expects, e.g. "FAIL"
  std::string got;       // the outcome seen
  std::string detail;    // numbers and the reason, in words
  bool passed = false;   // the checked property held
  bool as_expected = false;
  std::vector<std::pair<std::string, double>> numbers;  // what the check measured (lessons ask for them)
};

struct ScenarioResult {
  const Scenario* scenario = nullptr;
  std::vector<RunResult> runs;
  std::vector<CheckVerdict> verdicts;
  bool all_as_expected = true;
  /// A run stopped with an error no check expected (refused or faulted): the
  /// process should exit with its code (2 or 3) after printing the table.
  Status unexpected;
  /// A graceful stop (ScenarioRunOptions::stop_request): its signal. The last run
  /// in `runs` stopped early, the ones before it are complete, and no check ran.
  int stopped_by = 0;
};

/// Progress while a scenario runs (a line per run on a terminal).
class ScenarioObserver {
 public:
  virtual ~ScenarioObserver() = default;
  virtual void OnRunStart(const ScenarioRun& /*run*/, std::size_t /*index*/, std::size_t /*count*/) {}
  virtual void OnStep(const ScenarioRun& /*run*/, std::int64_t /*step*/, std::int64_t /*total*/) {}
};

struct ScenarioRunOptions {
  ScenarioObserver* observer = nullptr;
  std::string trace_path;     // a Chrome trace of the main run's first steps (empty: none)
  std::string datasets_root;  // empty: DTLAB_DATASETS_DIR
  /// Changes each run's configuration before it trains (dtlab replay: the math
  /// mode, a step limit, the compute backend).
  std::function<void(TrainConfig&)> adjust_config;
  bool record_digests = false;  // fill StepMetrics' digests
  /// Stops the scenario after the current step of the current run when it becomes
  /// nonzero (TrainConfig::stop_request). Not owned; null: never.
  const std::atomic<int>* stop_request = nullptr;
};

/// The checkpoint directory of every run that needs one (one another run resumes
/// from, or one that resumes), by run name: RunDirectory(work, name), so always
/// directly under `work` (the fuzzer, fuzz/scenario_fuzz.cc, holds it to that).
/// InvalidArgument naming the file when a name breaks CheckRunName.
StatusOr<std::map<std::string, std::string>> CheckpointDirectories(const Scenario& scenario, const std::string& work);

/// Runs every run and check of `scenario`. Errors: data that cannot be loaded
/// (NotFound, Corruption), a checkpoint directory that cannot be made (IOError).
StatusOr<ScenarioResult> RunScenario(const Scenario& scenario, const ScenarioRunOptions& options = {});

}  // namespace dtlab
