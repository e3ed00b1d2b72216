// Mixed precision in the synchronous engine (docs/mixed_precision.md): Keras's dtype
// policy (--precision float32, mixed_float16 or mixed_bfloat16: float32 variables,
// layers computing in the half type) and its LossScaleOptimizer (--loss-scale
// dynamic: the loss multiplied by a scale that halves when a gradient overflows and
// the step is skipped, core/loss_scale.h).
//
// Which gradients decide that a step is skipped (--loss-scale-check):
//  - reduced (dtlab's default): the all-reduced gradients, which every replica holds
//    alike, so every replica skips or applies the same step;
//  - first-replica: replica 0's own gradients, before the all-reduce. That is what
//    TF 2.21 / Keras 3 do in a custom training loop under MirroredStrategy
//    (keras/src/optimizers/loss_scale_optimizer.py, LossScaleOptimizer._tf_apply and
//    _common_apply: each replica checks its local gradients and the cond follows
//    replica 0's; measured in tests/peers/tf_loss_scale.json): an overflow on
//    another replica goes into the update;
//  - each-replica: every replica its own (the pitfall): a replica whose gradients
//    overflowed skips alone while the others apply, and the mirrored variables
//    diverge; dtlab stops the run and says so.
//
// Thread safety: values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/half_precision.h"
#include "core/loss_scale.h"
#include "core/status.h"

namespace dtlab {

enum class LossScaleCheck { kReduced, kFirstReplica, kEachReplica };
StatusOr<LossScaleCheck> ParseLossScaleCheck(std::string_view name);
std::string_view LossScaleCheckName(LossScaleCheck check);

/// "float32", "mixed_float16" or "mixed_bfloat16" (Keras's policy names) to the
/// type the layers compute in.
StatusOr<ComputeType> ParsePrecision(std::string_view name);
std::string_view PrecisionName(ComputeType compute);

struct MixedPrecision {
  ComputeType compute = ComputeType::kFloat32;
  bool dynamic_loss_scale = false;  // Keras's LossScaleOptimizer (dynamic)
  float initial_scale = DynamicLossScale::kKerasInitialScale;
  std::int64_t growth_steps = DynamicLossScale::kKerasGrowthSteps;
  LossScaleCheck check = LossScaleCheck::kReduced;

  bool half() const { return compute != ComputeType::kFloat32; }
  /// InvalidArgument (naming the option) for a loss scale that is not finite and
  /// positive or growth steps below 1.
  Status Validate() const;
  /// One line for the run's description, e.g. "mixed_float16, dynamic loss scale
  /// 32768 (x2 after 2000 finite steps), skips decided on the all-reduced gradients".
  std::string Description() const;
};

}  // namespace dtlab
