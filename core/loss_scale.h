// Keras 3's dynamic loss scale (keras/src/optimizers/loss_scale_optimizer.py,
// LossScaleOptimizer), the state that mixed_float16 training carries beside the
// optimizer: the loss is multiplied by scale() before the backward pass, so that
// small float16 gradients do not flush to zero, and the gradients are divided by it
// before the update. Each step then ends in one of two ways:
// - every gradient is finite: the update applies; the step counts, and the
//   growth_steps-th finite step in a row doubles the scale (the count restarts);
// - some gradient is infinite or NaN (the scaled loss overflowed float16): the
//   update is skipped (the inner optimizer's iterations do not advance) and the
//   scale halves (the count restarts).
// Keras's defaults: initial scale 2^15, growth every 2000 finite steps.
//
// Thread safety: a value type; not for concurrent mutation.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace dtlab {

class DynamicLossScale {
 public:
  static constexpr float kKerasInitialScale = 32768.0f;
  static constexpr std::int64_t kKerasGrowthSteps = 2000;

  /// REQUIRES: Validate(initial_scale, growth_steps) is OK.
  explicit DynamicLossScale(float initial_scale = kKerasInitialScale, std::int64_t growth_steps = kKerasGrowthSteps)
      : scale_(initial_scale), growth_steps_(growth_steps) {}

  /// InvalidArgument unless the scale is finite and positive and growth_steps >= 1.
  static Status Validate(float initial_scale, std::int64_t growth_steps);

  /// The scale of the next step's loss (and the divisor of its gradients).
  float scale() const { return scale_; }
  /// Finite steps in a row since the scale last changed.
  std::int64_t counter() const { return counter_; }
  std::int64_t growth_steps() const { return growth_steps_; }

  /// Ends a step whose gradients were all finite (`finite`) or not, as above;
  /// returns whether the step's update applies (that is, `finite`). Call it after
  /// the gradients were divided by scale().
  bool EndStep(bool finite);

  /// A checkpoint's state. InvalidArgument (naming it) for a scale that is not
  /// finite and positive or a counter outside [0, growth_steps).
  Status Restore(float scale, std::int64_t counter);

 private:
  float scale_;
  std::int64_t growth_steps_;
  std::int64_t counter_ = 0;
};

}  // namespace dtlab
