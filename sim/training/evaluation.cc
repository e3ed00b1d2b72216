#include "sim/training/evaluation.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/batch.h"
#include "core/checkpoint_manager.h"
#include "core/dataset.h"
#include "core/keras_model.h"
#include "core/metrics.h"
#include "core/text.h"
#include "core/training_state.h"
#include "sim/training/trainer.h"

namespace dtlab {

// The tutorial's test_step over the whole test set: Mean of per-example losses,
// SparseCategoricalAccuracy, batch by batch.
TestMetrics EvaluateTestSet(BatchRunner& runner, const ParameterList<float>& params, const ImageDataset& test,
                            std::int64_t batch_size, MathMode math) {
  Pipeline pipeline(test.count);
  (void)pipeline.Batch(batch_size);  // batch_size >= 1 was validated
  MeanMetric loss;
  ExactMeanMetric exact_loss;  // exact mode: the mean does not depend on the batch size either
  SparseCategoricalAccuracy accuracy;
  Tensor<float> images;
  std::vector<std::int32_t> labels, predictions;
  std::vector<float> losses;
  for (const auto& batch : pipeline.Iterate(0)) {
    GatherBatch(test, batch, images, labels);
    losses.resize(labels.size());
    predictions.resize(labels.size());
    runner.Evaluate(params, images, labels, losses, predictions, math);
    if (math == MathMode::kExact)
      exact_loss.UpdateState(losses);
    else
      loss.UpdateState(losses);
    accuracy.UpdateState(labels, predictions);
  }
  return {math == MathMode::kExact ? exact_loss.Result() : loss.Result(), accuracy.Result(), test.count};
}

StatusOr<EvalReport> EvaluateCheckpoint(const std::string& checkpoint_dir, const TrainTestData& data,
                                        std::int64_t batch_size) {
  CheckpointManager manager(checkpoint_dir, 0);
  DTLAB_ASSIGN_OR_RETURN(auto latest, manager.LatestPath());
  if (!latest) return Status::NotFound("no checkpoint in " + checkpoint_dir + " (train with --checkpoint-dir first)");
  DTLAB_ASSIGN_OR_RETURN(SafetensorsFile checkpoint, manager.RestoreLatest());
  auto model_name = checkpoint.metadata.find("dtlab.model");
  if (model_name == checkpoint.metadata.end())
    return Status::Corruption(*latest + ": no dtlab.model in the metadata; not a dtlab training checkpoint");
  const ImageDataset& test = data.test;
  const Shape image_shape{test.height, test.width, test.channels};
  // A model from a file is rebuilt from the description the checkpoint recorded
  // (checked as a file's would be); a checkpoint never makes dtlab read a file.
  std::unique_ptr<Sequential<float>> model;
  if (const auto json = checkpoint.metadata.find("dtlab.model_json"); json != checkpoint.metadata.end()) {
    DTLAB_ASSIGN_OR_RETURN(
        model, LoadKerasModel<float>(json->second, *latest + ": dtlab.model_json", image_shape, test.num_classes));
  } else if (IsModelFile(model_name->second)) {
    return Status::Corruption(*latest + ": dtlab.model names a model file ('" + Printable(model_name->second) +
                              "') but the checkpoint holds no dtlab.model_json; not a dtlab training checkpoint");
  } else {
    DTLAB_ASSIGN_OR_RETURN(model, MakeModel<float>(model_name->second, image_shape, test.num_classes));
  }
  auto params = RestoreParameters(checkpoint, *model);
  if (!params.ok()) return params.status().WithContext(*latest);
  if (batch_size <= 0) {
    auto it = checkpoint.metadata.find("dtlab.batch_per_replica");
    batch_size = it == checkpoint.metadata.end() ? 64 : std::max<std::int64_t>(1, std::atoll(it->second.c_str()));
  }
  BatchRunner runner(*model);
  auto math = checkpoint.metadata.find("dtlab.math");
  const MathMode mode =
      math != checkpoint.metadata.end() && math->second == "exact" ? MathMode::kExact : MathMode::kFast;
  if (batch_size <= 0 && mode == MathMode::kExact) {
    auto it = checkpoint.metadata.find("dtlab.global_batch");
    batch_size = it == checkpoint.metadata.end() ? 64 : std::max<std::int64_t>(1, std::atoll(it->second.c_str()));
  }
  const TestMetrics test_metrics = EvaluateTestSet(runner, *params, test, batch_size, mode);
  EvalReport report;
  report.checkpoint = *latest;
  report.model = model->name();
  if (auto step = checkpoint.GetI64("progress/step"); step.ok() && step->size() == 1) report.step = (*step)[0];
  report.test_loss = test_metrics.loss;
  report.test_accuracy = test_metrics.accuracy;
  report.examples = test_metrics.examples;
  return report;
}

}  // namespace dtlab
