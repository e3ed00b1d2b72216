#include "core/batch.h"

#include <algorithm>
#include <cassert>

namespace dtlab {

void GatherBatch(const ImageDataset& data, std::span<const std::int64_t> indices, Tensor<float>& images,
                 std::vector<std::int32_t>& labels) {
  const auto count = static_cast<std::int64_t>(indices.size());
  const std::int64_t image_size = data.image_size();
  images.Resize({count, data.height, data.width, data.channels});
  labels.resize(indices.size());
  for (std::int64_t k = 0; k < count; ++k) {
    const std::int64_t element = indices[static_cast<std::size_t>(k)];
    assert(element >= 0 && element < data.count);
    const float* source = data.images.data() + element * image_size;
    std::copy(source, source + image_size, images.data() + k * image_size);
    labels[static_cast<std::size_t>(k)] = data.labels[static_cast<std::size_t>(element)];
  }
}

}  // namespace dtlab
