#include "core/loss_scale.h"

#include <cmath>
#include <string>

namespace dtlab {

Status DynamicLossScale::Validate(float initial_scale, std::int64_t growth_steps) {
  if (!(std::isfinite(initial_scale) && initial_scale > 0.0f))
    return Status::InvalidArgument("the initial loss scale must be finite and positive, got " +
                                   std::to_string(initial_scale));
  if (growth_steps < 1)
    return Status::InvalidArgument("the loss scale's growth steps must be at least 1, got " +
                                   std::to_string(growth_steps));
  return Status::Ok();
}

bool DynamicLossScale::EndStep(bool finite) {
  if (!finite) {
    counter_ = 0;
    scale_ *= 0.5f;
    return false;
  }
  if (counter_ == growth_steps_ - 1) {
    counter_ = 0;
    scale_ *= 2.0f;
  } else {
    ++counter_;
  }
  return true;
}

Status DynamicLossScale::Restore(float scale, std::int64_t counter) {
  if (!(std::isfinite(scale) && scale > 0.0f))
    return Status::InvalidArgument("the checkpoint's loss scale is not finite and positive: " + std::to_string(scale));
  if (counter < 0 || counter >= growth_steps_)
    return Status::InvalidArgument("the checkpoint's loss scale counter " + std::to_string(counter) +
                                   " is outside [0, " + std::to_string(growth_steps_) + ")");
  scale_ = scale;
  counter_ = counter;
  return Status::Ok();
}

}  // namespace dtlab
