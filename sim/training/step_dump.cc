#include "sim/training/step_dump.h"

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "core/batch.h"
#include "core/file_io.h"
#include "core/loss.h"
#include "core/safetensors.h"
#include "sim/training/checkpointing.h"
#include "sim/engines/cluster.h"

namespace dtlab {

Status PrepareStepDump(const TrainConfig& config) {
  if (config.dump_dir.empty()) return Status::Ok();
  std::error_code ec;
  std::filesystem::create_directories(config.dump_dir, ec);
  if (ec) return Status::IOError("cannot create --dump-dir " + config.dump_dir + ": " + ec.message());
  return Status::Ok();
}

Status DumpStepIfAsked(const TrainConfig& config, const Sequential<float>& model, const ImageDataset& train,
                       const EngineStep& step, float learning_rate) {
  if (step.step != config.dump_step || step.weights_before == nullptr || step.reduced_gradient == nullptr ||
      step.result == nullptr || step.batch == nullptr)
    return Status::Ok();
  std::vector<std::int64_t> indices;
  for (const auto& replica : *step.batch) indices.insert(indices.end(), replica.begin(), replica.end());
  Tensor<float> images;
  std::vector<std::int32_t> labels;
  GatherBatch(train, indices, images, labels);
  const float loss = step.result->loss;
  SafetensorsFile file;
  file.metadata = RecordedSettings(config);
  file.metadata["dtlab.step"] = std::to_string(step.step);
  file.metadata["dtlab.learning_rate"] = std::to_string(learning_rate);
  if (model.description_json().empty()) {
    file.metadata["dtlab.l2"] = "1e-05";  // every built-in model's kernel regularizer
  } else {
    file.metadata["dtlab.model_json"] = model.description_json();  // its regularizers are per layer
  }
  // What each replica computed, so a peer can recompute the step replica by replica.
  // With gradient accumulation the step is K micro-batches, the batch written all of
  // them; the global rule's loss code divides by the step's K x G.
  file.metadata["dtlab.loss"] =
      config.cluster.LossCodeText(config.cluster.accumulation.LossGlobalBatch(config.global_batch_size()));
  file.metadata["dtlab.convention"] = std::string(ConventionName(config.cluster.convention));
  file.metadata["dtlab.loss_denominator"] = std::string(LossDenominatorName(config.cluster.denominator));
  file.metadata["dtlab.loss_reduction"] = std::string(LossReductionName(config.cluster.reduction));
  file.metadata["dtlab.keras"] = std::string(KerasVersionName(config.cluster.keras));
  file.metadata["dtlab.num_replicas_in_sync"] = std::to_string(config.cluster.replicas);
  if (config.cluster.accumulation.on()) {  // the batch is K micro-batches, each replica's run together
    file.metadata.insert_or_assign("dtlab.accumulation_steps", std::to_string(config.cluster.accumulation.steps));
    file.metadata.insert_or_assign("dtlab.accumulation",
                                   std::string(AccumulationRuleName(config.cluster.accumulation.rule)));
  }
  std::string sizes;
  for (const std::int64_t b : step.result->replica_batch_sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(b);
  file.metadata["dtlab.replica_batch_sizes"] = sizes;
  const auto& specs = model.parameters();
  const ParameterList<float>& weights = *step.weights_before;
  const ParameterList<float>& gradients = *step.reduced_gradient;
  for (std::size_t i = 0; i < specs.size(); ++i)
    DTLAB_RETURN_IF_ERROR(file.Add("weights/" + specs[i].name, weights[i]));
  DTLAB_RETURN_IF_ERROR(file.Add("batch/images", images));
  DTLAB_RETURN_IF_ERROR(
      file.Add("batch/labels", std::span<const std::int32_t>(labels), Shape{static_cast<std::int64_t>(labels.size())}));
  for (std::size_t i = 0; i < specs.size(); ++i)
    DTLAB_RETURN_IF_ERROR(file.Add("gradients/" + specs[i].name, gradients[i]));
  DTLAB_RETURN_IF_ERROR(file.Add("loss", std::span<const float>(&loss, 1), Shape{}));
  if (!model.description_json().empty()) {
    // A model from a file: its logits on the batch with these weights (an inference
    // pass: Dropout is the identity), for a peer to hold its own model to.
    Sequential<float>::Workspace workspace;
    DTLAB_RETURN_IF_ERROR(file.Add("batch/logits", model.Forward(weights, images, workspace)));
  }
  return WriteFileAtomically(config.dump_dir + "/step-" + std::to_string(step.step) + ".safetensors",
                             SerializeSafetensors(file));
}

}  // namespace dtlab
