// Gradient accumulation (--accumulation-steps K, --accumulation global|keras): an
// optimizer step takes K consecutive micro-batches of the input, each of the
// configured global batch G, and applies their gradients once (docs/semantics.md,
// "Gradient accumulation"; docs/training.md).
//
// Two rules say what the update's gradient is:
//  - global (dtlab's, the default): the optimizer step is one step over the union
//    of its micro-batches. Each replica's loss code sees the group's K x G as the
//    global batch and its examples of the whole group as its local batch, and the
//    regularization is added once; the micro-batches' gradients are summed (exact
//    mode: their accumulator words add as integers, rounded once). So K
//    micro-batches of G give the gradient of one step of K x G: bit for bit in exact
//    mode, within the float bound in fast mode.
//  - keras: Keras 3's `gradient_accumulation_steps` (keras/src/optimizers/
//    base_optimizer.py, BaseOptimizer._backend_apply_gradients): every micro-batch
//    runs the loss code as a step of its own (global batch G, its own local batch,
//    its own regularization), the optimizer adds the gradients into an accumulator
//    and, on every K-th call, applies (g + accumulator) / K. With a loss that divides
//    by the micro-batch's own size (sum_over_batch_size, as Keras's fit does), a short
//    micro-batch's examples weigh more: a mean of means.
//
// At the end of an epoch, a partial group (fewer than K micro-batches left) is,
// under global, applied with the step's denominator K x G, as a short last batch of
// K x G would be (dropped with --drop-remainder, as that batch would be); under
// keras it is carried into the next epoch, because Keras's optimizer counts every
// micro-batch of the run (`_iterations`) and applies when (iterations + 1) % K == 0.
//
// Thread safety: values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace dtlab {

enum class AccumulationRule {
  kGlobal,  // dtlab's: the micro-batches' gradients add up to one step of K x G
  kKeras,   // Keras 3's gradient_accumulation_steps: the mean of the micro-batches' gradients
};
StatusOr<AccumulationRule> ParseAccumulationRule(std::string_view name);
std::string_view AccumulationRuleName(AccumulationRule rule);

/// The largest --accumulation-steps: a bound before anything multiplies it.
inline constexpr std::int64_t kMaxAccumulationSteps = 1024;

struct GradientAccumulation {
  std::int64_t steps = 1;  // micro-batches per optimizer step (K); 1: no accumulation
  AccumulationRule rule = AccumulationRule::kGlobal;

  bool on() const { return steps > 1; }
  bool keras() const { return rule == AccumulationRule::kKeras; }

  /// InvalidArgument unless 1 <= steps <= kMaxAccumulationSteps.
  Status Validate() const;

  /// The global_batch_size a micro-batch's loss code divides by: K x G under
  /// global, G under keras. REQUIRES: Validate() passed, G <= 2^24.
  std::int64_t LossGlobalBatch(std::int64_t micro_global_batch) const {
    return keras() ? micro_global_batch : steps * micro_global_batch;
  }

  /// Micro-batches of earlier epochs that epoch `epoch` (0-based) starts with:
  /// under keras, (epoch x M) mod K for M micro-batches per epoch; under global, 0.
  std::int64_t CarriedInto(std::int64_t epoch, std::int64_t micro_batches_per_epoch) const;

  /// Optimizer steps that complete in an epoch of `micro_batches` after `carried`
  /// ones: global, ceil(M / K) (floor with drop_remainder, which drops the partial
  /// group); keras, floor((carried + M) / K).
  std::int64_t StepsInEpoch(std::int64_t micro_batches, std::int64_t carried, bool drop_remainder) const;

  /// Optimizer steps in `epochs` epochs of M micro-batches (saturating).
  std::int64_t StepsInEpochs(std::int64_t micro_batches_per_epoch, std::int64_t epochs, bool drop_remainder) const;

  /// One sentence for the Input line: "gradient accumulation: 4 micro-batches of 16
  /// per optimizer step (64 examples), the global rule ...".
  std::string Description(std::int64_t micro_global_batch) const;
};

}  // namespace dtlab
