#include "sim/engines/accumulation.h"

#include <limits>

#include "core/checked_number.h"
#include "core/enum_names.h"

namespace dtlab {
namespace {

constexpr NameTable<AccumulationRule, 2> kRules = {{
    {"global", AccumulationRule::kGlobal},
    {"keras", AccumulationRule::kKeras},
}};

}  // namespace

StatusOr<AccumulationRule> ParseAccumulationRule(std::string_view name) {
  return ParseEnumName(name, kRules, "accumulation rule");
}
std::string_view AccumulationRuleName(AccumulationRule rule) { return EnumName(rule, kRules); }

Status GradientAccumulation::Validate() const {
  if (steps < 1 || steps > kMaxAccumulationSteps)
    return Status::InvalidArgument("--accumulation-steps must be from 1 to " + std::to_string(kMaxAccumulationSteps) +
                                   ", got " + std::to_string(steps));
  return Status::Ok();
}

std::int64_t GradientAccumulation::CarriedInto(std::int64_t epoch, std::int64_t micro_batches_per_epoch) const {
  if (!keras() || steps <= 1) return 0;
  // (epoch x M) mod K without the product: both factors reduced mod K first.
  return (epoch % steps) * (micro_batches_per_epoch % steps) % steps;
}

std::int64_t GradientAccumulation::StepsInEpoch(std::int64_t micro_batches, std::int64_t carried,
                                                bool drop_remainder) const {
  if (keras()) return (carried + micro_batches) / steps;
  return drop_remainder ? micro_batches / steps : micro_batches / steps + (micro_batches % steps != 0 ? 1 : 0);
}

std::int64_t GradientAccumulation::StepsInEpochs(std::int64_t micro_batches_per_epoch, std::int64_t epochs,
                                                 bool drop_remainder) const {
  constexpr std::int64_t kMost = std::numeric_limits<std::int64_t>::max();
  if (!keras())
    return CheckedMultiply(StepsInEpoch(micro_batches_per_epoch, 0, drop_remainder), epochs).value_or(kMost);
  const auto all = CheckedMultiply(micro_batches_per_epoch, epochs);
  return all ? *all / steps : kMost / steps;
}

std::string GradientAccumulation::Description(std::int64_t micro_global_batch) const {
  const std::string k = std::to_string(steps), g = std::to_string(micro_global_batch);
  const std::string head = "gradient accumulation: " + k + " micro-batches of " + g + " per optimizer step (" +
                           std::to_string(steps * micro_global_batch) + " examples), ";
  if (keras())
    return head + "Keras's rule: each micro-batch's loss as a step of its own, the update (sum of the gradients) / " +
           k + ", a partial group carried into the next epoch";
  return head + "the global rule: the loss code sees the whole optimizer step (global batch " +
         std::to_string(steps * micro_global_batch) + ") and the micro-batches' gradients add up";
}

}  // namespace dtlab
