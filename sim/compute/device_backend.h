// Compute backends: where a step's forward and backward passes run. The Cluster
// (sim/engines/cluster.h) computes on the CPU with BatchRunner unless it is given a
// ComputeBackend; the rest of the step (loss scaling, the all-reduce, the
// optimizer, the reference check) is the same code whatever computes.
//
// Two backends run the device kernels of core/device_kernels.h through
// sim/compute/device_runner.h:
//   - "emulated": the kernels called in loops on the CPU. It needs no GPU and
//     checks everything of the GPU path but the launches and the memory.
//   - "cuda": the kernels on one or more GPUs (sim/cuda/), replicas on streams.
// Both compute exact mode bit for bit as the CPU does, and fast mode with the same
// per-example values and float sums over examples (docs/gpu.md).
//
// Thread safety: one backend per Cluster; calls are not concurrent.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "sim/compute/batch_runner.h"
#include "sim/compute/device_runner.h"

namespace dtlab {

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;
  /// E.g. "emulated: device kernels on the CPU" or "cuda: 1 x NVIDIA H100, 4 streams".
  virtual std::string Description() const = 0;
  /// BatchRunner::Run's contract (fast mode). Runtime error if the device fails.
  virtual Status Run(const Tensor<float>& images, std::span<const std::int32_t> labels,
                     std::span<const float> coefficients, std::span<float> per_example_loss,
                     std::span<std::int32_t> predictions, std::span<const BatchSegment> segments) = 0;
  /// The step the next Run or RunExact is, for Dropout's masks (BatchRunner::
  /// set_dropout_step). The device backends draw the masks on the host, as the CPU's
  /// layers do, and apply them on the device.
  virtual void SetDropoutStep(const DropoutStep& /*step*/) {}
  /// BatchRunner::RunExact's contract (exact mode).
  virtual Status RunExact(const Tensor<float>& images, std::span<const std::int32_t> labels,
                          std::span<const float> coefficients, std::span<float> per_example_loss,
                          std::span<std::int32_t> predictions, std::span<const ExactSegment> segments) = 0;
};

/// The model as the device kernels see it. InvalidArgument naming the layer if the
/// model has a layer they do not implement.
StatusOr<DevicePlan> MakeDevicePlan(const Sequential<float>& model);

/// A backend over any DeviceRunner (owned); `model` must outlive it.
std::unique_ptr<ComputeBackend> MakeDeviceBackend(const Sequential<float>& model, std::unique_ptr<DeviceRunner> runner);

/// The "emulated" runner: the device kernels on the CPU, in parallel on oneTBB.
/// Replica job j goes to lane j mod `lanes`, each lane with its own buffers, as
/// streams on a GPU (the lanes run one after the other).
std::unique_ptr<DeviceRunner> MakeHostRunner(DevicePlan plan, int lanes = 1);

/// The backend names --backend takes: "cpu", "emulated", "cuda".
inline const std::vector<std::string>& BackendNames() {
  static const std::vector<std::string> names{"cpu", "emulated", "cuda"};
  return names;
}

}  // namespace dtlab
