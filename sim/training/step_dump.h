// --dump-step: one optimizer step written out whole, so that a peer (PyTorch,
// TensorFlow) can recompute it replica by replica: the weights before the step,
// its global batch, the reduced gradient the update used and the loss, with the
// loss code each replica applied in the metadata (docs/training.md).
#pragma once

#include "core/model.h"
#include "core/mnist.h"
#include "core/status.h"
#include "sim/training/trainer.h"
#include "sim/engines/training_engine.h"

namespace dtlab {

/// Creates config.dump_dir if the run dumps a step (IOError if it cannot), so
/// that an unwritable directory is found before training, not at the step.
Status PrepareStepDump(const TrainConfig& config);

/// Writes config.dump_dir/step-N.safetensors for `step` if it is config.dump_step
/// (a synchronous step, with its weights before and reduced gradient captured);
/// otherwise does nothing. IOError if writing fails.
Status DumpStepIfAsked(const TrainConfig& config, const Sequential<float>& model, const ImageDataset& train,
                       const EngineStep& step, float learning_rate);

}  // namespace dtlab
