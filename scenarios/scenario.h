// Scenario files: a distributed-training experiment and the verdicts it must give
// (docs/scenarios.md is the file reference).
//
// A scenario (TOML) declares a base run (cluster, data, model, loss code, optimizer,
// math mode, steps), optional variants of it (the base with some keys changed,
// or continuing another run's checkpoint), and checks with expected verdicts:
//
//   title = "Per-replica mean as the loss denominator"
//   description = "tf.reduce_mean on each replica makes the gradients N times too large"
//   [cluster]  strategy = "mirrored"  replicas = 4
//   [data]     source = "fashion-mnist"  train_examples = 2048  global_batch = 256
//   [loss]     denominator = "per-replica"
//   [run]      steps = 3  check_reference = true
//   [[check]]  kind = "reference"  expect = "fail"
//
// Every key is checked: an unknown key, a wrong type or an unknown name is an
// InvalidArgument "FILE:LINE: ..." naming the key and the allowed keys or values.
// A run's keys are the options of scenarios/run_options.h, which `dtlab train`'s
// flags read too.
// `--set key=value` overrides (dotted keys, TOML values; a bare word is a string)
// apply to the base before validation; their errors name the --set.
//
// Thread safety: the functions are reentrant; the structs are values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "scenarios/run_options.h"
#include "sim/check/loss_check.h"
#include "sim/training/trainer.h"

namespace dtlab {

/// One training run: the base ("main") or a variant of it.
struct ScenarioRun {
  std::string name;
  std::string description;  // one line, optional
  TrainConfig config;       // checkpoint_dir is set by the runner when needed
  ScenarioData data;
  std::string resume_from;        // continue the checkpoint another run left (empty: start afresh)
  std::vector<std::string> sets;  // the overrides that made this variant from the base
};

enum class ScenarioCheckKind {
  kReference,     // the run's every step matches one device (within the bound, or bitwise in exact mode)
  kBitwiseEqual,  // two runs end with bitwise-equal variables
  kValue,         // a named value of a run is within [min, max] or approx +- tolerance
  kRefused,       // the run is refused as invalid (its message contains `contains`)
  kFault,         // the run stops with a runtime fault (non-finite values...)
  kLossCase,      // one explicit batch split through a built-in loss code (sim/check/loss_check.h)
  kMeanMetric,    // the Mean-metric trap on given per-replica losses
  kCompare,       // a named value of runs[0] is below the same value of runs[1]
  kAllReduce,     // an all-reduce drawn chunk by chunk (scenarios/all_reduce_drawing.h) sums correctly
};

struct ScenarioCheck {
  ScenarioCheckKind kind = ScenarioCheckKind::kReference;
  std::string label;              // shown in the verdict table
  std::vector<std::string> runs;  // the runs it reads (two for bitwise_equal and compare)
  std::string value;              // kValue, kCompare: the value's name (see ScenarioValueNames)
  std::optional<double> min, max, approx;
  std::string approx_value;  // kValue: approx is this other value of the same run (e.g. "replicas")
  double tolerance = 0.01;   // relative, for approx
  std::string contains;      // kRefused, kFault: a substring of the message
  // kLossCase
  std::string code;  // correct, per-replica-mean, default-denominator, unscaled-regularization, per-pixel-without-hw
  CheckCase loss_case;
  // kAllReduce
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kRing;
  std::int32_t replicas = 3;
  std::int64_t count = 6;
  // kMeanMetric
  std::vector<std::vector<double>> replica_losses;
  std::int64_t global_batch = 0;
  bool expect_pass = true;
  int line = 0;
};

struct Scenario {
  std::string path, name;  // name: the file stem
  std::string title, description;
  /// One line for summaries: "gradients {{gradient_ratio}}x too large"; {{name}} is a
  /// value of the main run, {{run.name}} of another run (ScenarioValueNames()).
  std::string headline;
  std::vector<ScenarioRun> runs;  // runs[0] is "main"; none when the file has no [run] table
  std::vector<ScenarioCheck> checks;
  std::vector<std::string> summary;  // scenarios to summarize after this one (the flagship's pitfalls)
};

/// The longest run name CheckRunName allows.
inline constexpr std::size_t kMaxRunNameLength = 64;

/// Run names are names, never paths: a run's name becomes a directory name (its
/// checkpoints while the scenario runs, its TensorBoard folder). OK when `name`
/// is 1 to kMaxRunNameLength characters of [A-Za-z0-9._-] and not "." or "..";
/// otherwise InvalidArgument saying which rule it breaks.
Status CheckRunName(std::string_view name);

/// `parent/name` for a run's own directory, after CheckRunName: so whatever a
/// scenario says, a run's outputs stay directly under `parent`.
StatusOr<std::string> RunDirectory(const std::string& parent, const std::string& run_name);

/// Parses scenario text; `path` names it in errors (and resolves relative data dirs).
StatusOr<Scenario> ParseScenario(std::string_view text, const std::string& path,
                                 const std::vector<std::string>& sets = {});
/// Reads and parses a file. NotFound naming the path if it cannot be read.
StatusOr<Scenario> LoadScenario(const std::string& path, const std::vector<std::string>& sets = {});

/// The named values a training run reports (the names `kind = "value"` checks and
/// lessons use), with a one-line meaning each.
const std::vector<std::pair<std::string, std::string>>& ScenarioValueNames();

/// The built-in loss codes a loss_case check can name.
StatusOr<LossScalingCode> BuiltinLossCode(std::string_view name);

}  // namespace dtlab
