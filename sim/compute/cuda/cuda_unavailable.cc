// sim/compute/cuda/cuda_backend.h in a build without CUDA (DTLAB_WITH_CUDA off).
#include "sim/compute/cuda/cuda_backend.h"

namespace dtlab {
namespace {

constexpr const char* kNoCuda =
    "no CUDA device: this dtlab was built without CUDA (configure with the CUDA toolkit installed, or "
    "-DDTLAB_WITH_CUDA=ON; see docs/gpu.md)";

}  // namespace

CudaInventory QueryCudaDevices() {
  CudaInventory inventory;
  inventory.problem = kNoCuda;
  return inventory;
}

StatusOr<std::unique_ptr<DeviceRunner>> MakeCudaRunner(DevicePlan /*plan*/, const std::vector<int>& /*devices*/,
                                                       int /*streams_per_device*/) {
  return Status::NotFound(kNoCuda);
}

StatusOr<AllReduceMeasurement> MeasureCudaAllReduce(const std::vector<int>& /*devices*/, int /*replicas*/,
                                                    std::int64_t /*elements*/) {
  return Status::NotFound(kNoCuda);
}

}  // namespace dtlab
