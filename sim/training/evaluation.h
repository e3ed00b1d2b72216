// Evaluation on the test set: the tutorial's test_step over the whole set (Mean
// of the per-example losses and SparseCategoricalAccuracy, batch by batch), after
// every epoch of Train and for `dtlab eval` (EvaluateCheckpoint, sim/training/trainer.h).
#pragma once

#include <cstdint>

#include "core/mnist.h"
#include "core/model.h"
#include "sim/compute/batch_runner.h"

namespace dtlab {

struct TestMetrics {
  float loss = 0, accuracy = 0;
  std::int64_t examples = 0;
};

/// Evaluates `params` on all of `test` in batches of `batch_size`; in exact mode
/// the mean loss does not depend on the batch size either. REQUIRES: batch_size >= 1.
TestMetrics EvaluateTestSet(BatchRunner& runner, const ParameterList<float>& params, const ImageDataset& test,
                            std::int64_t batch_size, MathMode math);

}  // namespace dtlab
