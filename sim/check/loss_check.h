// Property checks of loss scaling (docs/check.md): does a training loop's loss code
// give the gradient one device computes on the global batch, for every replica
// count and every batch, not only the one that was tried?
//
// A property runs on RapidCheck over random clusters (N replicas, W workers), global
// batch sizes (short final batches and empty replicas included), both rebatch rules,
// sample weights, per-pixel label shapes and regularization. On a failure RapidCheck
// shrinks the case to a minimal one, which is written in plain words ("2 replicas,
// global batch 3 split [2, 1] ...: example 3 weighs 2x ...").
//
// The loss code under test is a pair of callables (LossScalingCode; the built-in
// ones are sim/engines/loss_code.h's named codes, ScalingCodeOf): the scalar
// loss a replica computes from its per-value losses, and its share of the
// regularization. Both must be linear in the losses (every loss-scaling formula
// is): dtlab reads the weight each example gets by evaluating the code on unit
// losses, compares it with the global-batch weight w_i / G, and then runs the real
// thing in exact mode (docs/exact.md): the replicas' gradients of a small model,
// all-reduced as accumulator words, against one device's, bit for bit.
//
// Thread safety: each call is independent; the callables must be callable from the
// calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "sim/input/distributed_input.h"
#include "sim/engines/loss_code.h"

namespace dtlab {

/// What a replica's loss code can see inside strategy.run.
struct ReplicaInfo {
  std::int32_t replica_id = 0;
  std::int32_t num_replicas_in_sync = 1;
  std::int64_t global_batch_size = 0;   // the configured global batch (GLOBAL_BATCH_SIZE)
  std::int64_t local_batch = 0;         // examples on this replica this step (may be 0)
  std::int64_t values_per_example = 1;  // 1, or H*W losses per example for per-pixel labels
};

/// A replica's scalar loss from its losses (local_batch * values_per_example
/// values, example-major) and per-example sample weights (local_batch values, or
/// empty when the batch has none). REQUIRES: linear in `losses`.
using ReplicaLossFn =
    std::function<double(std::span<const double> losses, std::span<const double> weights, const ReplicaInfo& replica)>;
/// A replica's share of the regularization loss `r` (for example r / N).
/// REQUIRES: linear in `r`.
using RegularizationFn = std::function<double(double r, const ReplicaInfo& replica)>;

/// The loss code under test.
struct LossScalingCode {
  ReplicaLossFn loss;
  RegularizationFn regularization;  // empty: the model has no regularization
  /// Losses per example: 1 for classification; > 1 makes per-pixel label shapes
  /// (H*W drawn from {4, 9}) part of the random cases.
  bool per_pixel = false;
};

struct CheckOptions {
  int trials = 100;
  std::uint64_t seed = 0;  // the RapidCheck seed; the same seed replays the same cases
  std::int32_t max_replicas = 16;
  bool sample_weights = true;
  /// Require the distributed gradient to equal one device's bit for bit (exact
  /// mode), not only the per-example weights to be right. TF's 1/N regularization
  /// split rounds when N is not a power of two (docs/exact.md), so code that uses
  /// it passes only with this off.
  bool bitwise = true;
};

/// One random case.
struct CheckCase {
  std::int32_t replicas = 1, workers = 1;
  std::int64_t global_batch = 1, batch = 1;  // batch < global_batch: a short final batch
  RebatchRule rule = RebatchRule::kV2;
  std::vector<double> weights;  // empty: no sample weights
  std::int64_t values_per_example = 1;
  std::vector<std::int64_t> split;  // examples per replica
};

struct CheckResult {
  bool passed = true;
  int trials = 0;  // cases that passed
  std::uint64_t seed = 0;
  std::string counterexample;  // the shrunk failing case, in words (empty when passed)
  std::string error;           // the check could not run (e.g. non-linear loss code)
};

/// Runs the property "`code` gives the global-batch gradient" (see above).
CheckResult CheckLossScaling(const LossScalingCode& code, const CheckOptions& options);

/// Evaluates one case: empty when it passes, else the counterexample in words.
std::string EvaluateLossScalingCase(const LossScalingCode& code, const CheckCase& c, bool bitwise);

/// A built-in property of `dtlab check`.
struct BuiltinProperty {
  std::string name;
  std::string description;  // one line
  bool expect_pass;         // false: a pitfall, which the property must catch
  std::function<CheckResult(const CheckOptions&)> run;
};

/// Every built-in property, in `dtlab check --list` order.
const std::vector<BuiltinProperty>& BuiltinProperties();

/// A named loss code (sim/engines/loss_code.h) as the callables the property evaluates.
LossScalingCode ScalingCodeOf(const NamedLossCode& code);
/// The built-in code `name` (NamedLossCodes), or InvalidArgument listing the names.
StatusOr<LossScalingCode> BuiltinScalingCode(std::string_view name);

/// The built-in loss codes the properties use (also handy for tests).
LossScalingCode TfCorrectScaling();           // compute_average_loss(global_batch_size) + exact regularization split
LossScalingCode PerReplicaMeanScaling();      // tf.reduce_mean on each replica
LossScalingCode DefaultDenominatorScaling();  // compute_average_loss without global_batch_size
LossScalingCode UnscaledRegularization();     // every replica adds the whole regularization
LossScalingCode PerPixelWithoutHw();          // per-pixel losses divided by the global batch only

}  // namespace dtlab
