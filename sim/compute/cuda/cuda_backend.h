// The CUDA side of dtlab (docs/gpu.md): the GPUs this machine has, and a
// DeviceRunner that runs the device kernels (core/device_kernels.h) on them.
// A plain C++ header: the CUDA types stay in cuda_backend.cu. In a build without
// CUDA (DTLAB_WITH_CUDA off) cuda_unavailable.cc defines these functions, and they
// say so.
//
// Thread safety: functions may run concurrently; a runner is used by one caller.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "sim/compute/device_runner.h"

namespace dtlab {

struct CudaDeviceInfo {
  int index = 0;
  std::string name, pci_bus_id;
  std::size_t total_memory = 0, free_memory = 0;  // bytes
  int compute_major = 0, compute_minor = 0, multiprocessors = 0;
};

struct CudaInventory {
  bool built_with_cuda = false;
  std::string runtime_version, driver_version, nccl_version;  // "13.0", ...; empty if unknown
  std::vector<CudaDeviceInfo> devices;
  std::vector<std::vector<bool>> peer_access;  // [i][j]: device i can read device j's memory directly
  std::string problem;                         // why there are no devices, in words (empty if there are)
};

/// What this build and machine have. Never fails: a missing driver or device is
/// described in `problem`.
CudaInventory QueryCudaDevices();

/// A runner on the GPUs `devices` (indices from QueryCudaDevices) with
/// `streams_per_device` streams each: replica job j runs on stream j mod (streams x
/// devices), the lanes dealt round-robin over the devices. NotFound ("no CUDA
/// device ...") when there is no GPU or the build has no CUDA; InvalidArgument for
/// an index that does not exist.
StatusOr<std::unique_ptr<DeviceRunner>> MakeCudaRunner(DevicePlan plan, const std::vector<int>& devices,
                                                       int streams_per_device);

/// One all-reduce of `elements` int64 words per replica across `replicas`
/// buffers on the GPUs, as nccl-tests reports it.
struct AllReduceMeasurement {
  std::string method;  // "nccl" (one replica per GPU) or "streams" (replicas on one GPU, summed by a kernel)
  std::int64_t bytes = 0;
  double seconds = 0;           // the best of a few runs
  double algbw = 0, busbw = 0;  // GB/s: bytes / time, and algbw x 2(n-1)/n
  std::int64_t wrong = 0;       // elements that differ from the exact integer sum
};

/// Measures the all-reduce of the gradient words of a step on the GPUs (each
/// replica's buffer holds values known in advance, so the count of wrong elements is exact).
/// NotFound without a GPU.
StatusOr<AllReduceMeasurement> MeasureCudaAllReduce(const std::vector<int>& devices, int replicas,
                                                    std::int64_t elements);

}  // namespace dtlab
