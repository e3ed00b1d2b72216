// The vocabulary of a distributed run: strategies, loss conventions and
// denominators, with their names on the command line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace dtlab {

/// tf.distribute strategies.
enum class StrategyKind {
  kOneDevice,            // OneDeviceStrategy: one replica
  kMirrored,             // MirroredStrategy: N replicas, mirrored variables, all-reduce
  kCentralStorage,       // CentralStorageStrategy: one host copy; reduce to it, broadcast back
  kMultiWorkerMirrored,  // MultiWorkerMirroredStrategy: W workers x R replicas, input sharded
  kTpu,                  // TPUStrategy: synchronous replicas on a 2-D torus
  kParameterServer,      // ParameterServerStrategy: asynchronous workers, sharded variables
};
StatusOr<StrategyKind> ParseStrategy(std::string_view name);
std::string_view StrategyName(StrategyKind kind);

/// How replicas combine their losses.
enum class Convention {
  kTf,   // each replica scales its loss (compute_average_loss); gradients SUM all-reduced
  kDdp,  // each replica takes its local mean (PyTorch DDP); gradients MEAN all-reduced
};
StatusOr<Convention> ParseConvention(std::string_view name);
std::string_view ConventionName(Convention convention);

/// The denominator a replica divides its summed per-example losses by (TF convention).
enum class LossDenominator {
  kDefault,     // compute_average_loss(l): local batch x num_replicas_in_sync
  kGlobal,      // compute_average_loss(l, global_batch_size=G): the configured global batch
  kPerReplica,  // tf.reduce_mean(l): the local batch (the classic pitfall)
};
StatusOr<LossDenominator> ParseLossDenominator(std::string_view name);
std::string_view LossDenominatorName(LossDenominator denominator);

/// How the regularization loss is shared among the replicas (docs/exact.md).
enum class RegularizationSplit {
  kTf,     // scale_regularization_loss: every replica adds r / N (inexact when N is not a power of two)
  kExact,  // replica 0 adds r, the others nothing: the total is exactly r for any N
};
StatusOr<RegularizationSplit> ParseRegularizationSplit(std::string_view name);
std::string_view RegularizationSplitName(RegularizationSplit split);

/// Whether each replica scales the regularization loss by 1/N (scale_regularization_loss).
enum class RegularizationScaling {
  kScaled,    // scale_regularization_loss(r) = r / N on each replica; the SUM gives r
  kUnscaled,  // each replica adds r itself (the pitfall): the SUM gives N x r, N times the weight decay
};
StatusOr<RegularizationScaling> ParseRegularizationScaling(std::string_view name);
std::string_view RegularizationScalingName(RegularizationScaling scaling);

/// What compute_average_loss does for a replica with no examples under the default
/// denominator (local batch x N = 0).
enum class EmptyReplicaLoss {
  kZero,   // TF 2.13 and later: assert_non_negative, then div_no_nan: the replica's loss is 0
  kError,  // TF 2.12 and before: assert_positive raises InvalidArgumentError "global_batch_size must be positive."
};
StatusOr<EmptyReplicaLoss> ParseEmptyReplicaLoss(std::string_view name);
std::string_view EmptyReplicaLossName(EmptyReplicaLoss behaviour);

/// The denominator replica r uses: `local_batch` examples on this replica,
/// `global_batch_size` the configured global batch, `num_replicas` in sync.
std::int64_t ReplicaDenominator(LossDenominator rule, std::int64_t local_batch, std::int64_t global_batch_size,
                                std::int32_t num_replicas);

}  // namespace dtlab
