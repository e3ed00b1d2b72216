#include "sim/compute/parallel_update.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <tbb/parallel_for.h>

namespace dtlab {

void ApplyInParallel(Optimizer& optimizer, std::span<Tensor<float>> params, std::span<const Tensor<float>> grads,
                     float learning_rate) {
  // Slices of at most 16384 elements (64 KiB of each array): small parameters are one
  // task each, the large ones several.
  constexpr std::int64_t kSlice = 16384;
  struct Slice {
    std::size_t param;
    std::int64_t begin, end;
  };
  std::vector<Slice> slices;
  for (std::size_t p = 0; p < params.size(); ++p)
    for (std::int64_t begin = 0; begin < params[p].size(); begin += kSlice)
      slices.push_back({p, begin, std::min(params[p].size(), begin + kSlice)});
  const Optimizer::StepConstants step = optimizer.BeginStep(learning_rate);
  tbb::parallel_for(std::size_t{0}, slices.size(), [&](std::size_t s) {
    const Slice& slice = slices[s];
    optimizer.UpdateElements(step, slice.param, slice.begin, slice.end, params[slice.param].data(),
                             grads[slice.param].data());
  });
  optimizer.EndStep();
}

}  // namespace dtlab
