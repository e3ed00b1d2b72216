#include "sim/training/accumulation_run.h"

#include <string>

namespace dtlab {

Status CheckAccumulationCheckpoints(const TrainConfig& config,
                                    const std::function<StatusOr<std::int64_t>()>& micro_batches_per_epoch) {
  const GradientAccumulation& accumulation = config.cluster.accumulation;
  if (!accumulation.on() || !accumulation.keras() || (config.checkpoint_dir.empty() && config.backup_dir.empty()))
    return Status::Ok();
  DTLAB_ASSIGN_OR_RETURN(const std::int64_t micro_batches, micro_batches_per_epoch());
  if (micro_batches % accumulation.steps == 0) return Status::Ok();
  const std::string k = std::to_string(accumulation.steps);
  return Status::InvalidArgument(
      std::string(config.checkpoint_dir.empty() ? "--backup-dir" : "--checkpoint-dir") +
      " with --accumulation keras: an epoch holds " + std::to_string(micro_batches) +
      " micro-batches, which --accumulation-steps " + k +
      " does not divide, so each epoch's last group is carried into the next epoch (as Keras's optimizer does), and a "
      "checkpoint, written only at an optimizer step's end, holds no accumulator; use an --accumulation-steps that "
      "divides " +
      std::to_string(micro_batches) + ", --accumulation global (which applies the partial group), or no checkpoints");
}

std::int64_t OptimizerStepsInEpoch(const TrainConfig& config, std::int64_t epoch, std::size_t micro_batches) {
  const GradientAccumulation& accumulation = config.cluster.accumulation;
  const auto m = static_cast<std::int64_t>(micro_batches);
  if (!accumulation.on()) return m;
  return accumulation.StepsInEpoch(m, accumulation.CarriedInto(epoch, m), config.drop_remainder);
}

}  // namespace dtlab
