// Gradient accumulation in the training loop (sim/engines/accumulation.h): what a
// run with --accumulation-steps K must check before it starts, and how many
// optimizer steps an epoch of micro-batches holds. The engine groups the
// micro-batches (sim/engines/cluster_accumulation.cc); everything the loop counts
// (--steps, the progress line, checkpoints, metrics) is optimizer steps.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "core/status.h"
#include "sim/training/trainer.h"

namespace dtlab {

/// A checkpoint is written only at an optimizer step's end and holds no
/// accumulator, so a run that saves one must start every epoch with a fresh group.
/// The keras rule carries an epoch's partial group into the next epoch (as Keras's
/// optimizer does): with --checkpoint-dir or --backup-dir it is refused
/// (InvalidArgument, with the fix) unless K divides the micro-batches of an epoch.
/// `micro_batches_per_epoch` is asked only then.
Status CheckAccumulationCheckpoints(const TrainConfig& config,
                                    const std::function<StatusOr<std::int64_t>()>& micro_batches_per_epoch);

/// The optimizer steps that complete in epoch `epoch` (0-based) of a run whose
/// epochs hold `micro_batches` each: the micro-batches themselves without
/// accumulation.
std::int64_t OptimizerStepsInEpoch(const TrainConfig& config, std::int64_t epoch, std::size_t micro_batches);

}  // namespace dtlab
