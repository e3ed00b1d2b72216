// Gathering a batch: copying the images and labels of chosen elements of an
// ImageDataset into a contiguous tensor, the input of one training step.
//
// Thread safety: GatherBatch only reads `data`; concurrent calls with distinct
// outputs are safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/mnist.h"
#include "core/tensor.h"

namespace dtlab {

/// Fills `images` with shape {n, height, width, channels} and `labels` with n
/// labels, where n = indices.size() and row k holds element indices[k] of `data`.
/// The outputs are resized in place, so reusing them across steps does not
/// allocate. REQUIRES: every index is in [0, data.count).
void GatherBatch(const ImageDataset& data, std::span<const std::int64_t> indices, Tensor<float>& images,
                 std::vector<std::int32_t>& labels);

}  // namespace dtlab
