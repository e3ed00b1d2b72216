#include "sim/engines/mixed_precision.h"

#include <cmath>
#include <cstdio>

#include "core/enum_names.h"

namespace dtlab {
namespace {

constexpr NameTable<LossScaleCheck, 3> kChecks = {{{"reduced", LossScaleCheck::kReduced},
                                                   {"first-replica", LossScaleCheck::kFirstReplica},
                                                   {"each-replica", LossScaleCheck::kEachReplica}}};
constexpr NameTable<ComputeType, 3> kPrecisions = {{{"float32", ComputeType::kFloat32},
                                                    {"mixed_float16", ComputeType::kFloat16},
                                                    {"mixed_bfloat16", ComputeType::kBFloat16}}};

}  // namespace

StatusOr<LossScaleCheck> ParseLossScaleCheck(std::string_view name) {
  return ParseEnumName(name, kChecks, "loss scale check");
}
std::string_view LossScaleCheckName(LossScaleCheck check) { return EnumName(check, kChecks); }

StatusOr<ComputeType> ParsePrecision(std::string_view name) { return ParseEnumName(name, kPrecisions, "precision"); }
std::string_view PrecisionName(ComputeType compute) { return EnumName(compute, kPrecisions); }

Status MixedPrecision::Validate() const {
  if (!dynamic_loss_scale) return Status::Ok();
  if (!std::isfinite(initial_scale) || initial_scale <= 0) {
    char got[64];
    std::snprintf(got, sizeof got, "%g", static_cast<double>(initial_scale));
    return Status::InvalidArgument(std::string("--loss-scale-initial must be a finite number above 0 (Keras: 32768), "
                                               "got ") +
                                   got);
  }
  if (growth_steps < 1)
    return Status::InvalidArgument("--loss-scale-growth-steps must be 1 or more (Keras: 2000), got " +
                                   std::to_string(growth_steps));
  return DynamicLossScale::Validate(initial_scale, growth_steps);
}

std::string MixedPrecision::Description() const {
  std::string text(PrecisionName(compute));
  if (!dynamic_loss_scale) return text + (half() ? ", no loss scale" : "");
  char scale[64];
  std::snprintf(scale, sizeof scale, "%g", static_cast<double>(initial_scale));
  return text + ", dynamic loss scale " + scale + " (x2 after " + std::to_string(growth_steps) +
         " finite steps, /2 and the step skipped on a non-finite gradient), skips decided on " +
         (check == LossScaleCheck::kReduced        ? "the all-reduced gradients"
          : check == LossScaleCheck::kFirstReplica ? "replica 0's gradients (TF 2.21)"
                                                   : "each replica's own gradients");
}

}  // namespace dtlab
