// ApplyInParallel: one optimizer step with its elements spread over oneTBB tasks.
// Every rule is elementwise (core/optimizer.h), so the bits equal Optimizer::Apply's
// whatever the thread count or the partition.
#pragma once

#include <span>

#include "core/optimizer.h"

namespace dtlab {

/// optimizer.Apply(params, grads, learning_rate), in parallel over slices of the
/// parameters. REQUIRES: as Optimizer::Apply.
void ApplyInParallel(Optimizer& optimizer, std::span<Tensor<float>> params, std::span<const Tensor<float>> grads,
                     float learning_rate);

}  // namespace dtlab
