// DeviceRunnerOn: one step's forward and backward passes of a model on a device,
// replica by replica, with the element kernels of core/device_kernels.h.
//
// The runner is written once over a Device policy, which says how to allocate,
// copy and launch:
//   - sim/compute/cuda/cuda_backend.cu: CUDA. Each replica's segment runs on a lane, a
//     CUDA stream; lanes are spread over the GPUs of --devices (several streams on
//     one GPU, or one replica per GPU).
//   - sim/compute/device_backend.cc's HostDevice: the same kernels, called in loops on the
//     CPU (oneTBB). No GPU needed; CI runs every scenario with it, so everything but
//     the launch and the memory of the CUDA path is tested on every commit.
//
// A Device provides:
//   int lanes() const;
//   void* Allocate(int lane, std::size_t bytes);  void Free(int lane, void* p);
//   void CopyIn(int lane, void* device, const void* host, std::size_t bytes);
//   void CopyOut(int lane, void* host, const void* device, std::size_t bytes);
//   template <class Kernel> void Launch(int lane, Index n, const Kernel& k);  // k(i), i in [0, n)
//   void Synchronize(int lane);  // waits for the lane's copies and kernels
// and throws DeviceError (with the device's message) when an operation fails.
//
// The runner holds no CUDA or Eigen types, so nvcc compiles it with the kernels.
//
// Thread safety: one runner per caller.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/device_kernels.h"

namespace dtlab {

/// What a device reports when an allocation, copy or launch fails.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A model as the device runs it: its layers, with the shapes of one example.
struct DeviceLayer {
  enum class Kind { kConv, kPool, kDense, kReshape, kDropout };
  Kind kind = Kind::kReshape;
  kernels::Index in_h = 1, in_w = 1, in_c = 1;     // one example's input (a vector: in_c features)
  kernels::Index out_h = 1, out_w = 1, out_c = 1;  // one example's output
  kernels::Index kernel_h = 0, kernel_w = 0;       // convolutions
  bool relu = false;
  std::size_t parameter = 0;  // Conv and Dense: the kernel's index; the bias is parameter + 1
  std::size_t dropout = 0;    // Dropout: which of the model's Dropout layers (DeviceJob::dropout_keep)
  float dropout_scale = 0;    // Dropout: a kept element's factor (DropoutScale)
  kernels::Index in_size() const { return in_h * in_w * in_c; }
  kernels::Index out_size() const { return out_h * out_w * out_c; }
};

struct DevicePlan {
  std::vector<DeviceLayer> layers;
  std::vector<kernels::Index> parameter_offsets;  // parameter p's first value in the flat vector; back() = total
  kernels::Index example_size = 0, classes = 0;
  kernels::Index parameter_values() const { return parameter_offsets.back(); }
};

/// One step's batch, on the host.
struct DeviceBatch {
  const float* images = nullptr;         // [batch, example_size]
  const std::int32_t* labels = nullptr;  // [batch]
  const float* coefficients = nullptr;   // [batch]; may be null when no job has gradients
  float* losses = nullptr;               // [batch], written
  std::int32_t* predictions = nullptr;   // [batch], written
};

/// One replica's share of the step: examples [begin, begin + count).
struct DeviceJob {
  const float* parameters = nullptr;  // the flat variables (DevicePlan order), on the host
  kernels::Index begin = 0, count = 0;
  std::int64_t* words = nullptr;  // exact: kExactWords per value, overwritten with the normalized exact sums
  float* grads = nullptr;         // fast: overwritten with the float sums
  float* magnitudes = nullptr;    // fast, optional: sum of |term| per gradient value
  /// One host mask per Dropout layer of the plan ([count, the layer's input size],
  /// 1 keeps), drawn by the host (DrawDropoutMask); empty, or a null mask: that
  /// layer is the identity (not a training step, or rate 0).
  std::span<const std::uint8_t* const> dropout_keep;
};

/// What a backend runs steps on: a DeviceRunnerOn over some Device, type-erased so
/// that the CUDA one lives in its own library (sim/cuda/).
class DeviceRunner {
 public:
  virtual ~DeviceRunner() = default;
  /// E.g. "cuda: 1 x NVIDIA H100 80GB HBM3, 4 streams".
  virtual std::string Description() const = 0;
  /// DeviceRunnerOn::Run. Throws DeviceError.
  virtual void Run(const DeviceBatch& batch, std::span<const DeviceJob> jobs) = 0;
};

template <class Device>
class DeviceRunnerOn {
 public:
  DeviceRunnerOn(DevicePlan plan, Device device) : plan_(std::move(plan)), device_(std::move(device)) {
    lanes_.resize(static_cast<std::size_t>(device_.lanes()));
  }
  ~DeviceRunnerOn() {
    for (std::size_t l = 0; l < lanes_.size(); ++l)
      for (auto& buffer : lanes_[l].buffers)
        if (buffer.data) device_.Free(static_cast<int>(l), buffer.data);
  }
  DeviceRunnerOn(const DeviceRunnerOn&) = delete;
  DeviceRunnerOn& operator=(const DeviceRunnerOn&) = delete;

  /// Runs every job (job j on lane j mod lanes()), then waits for all of them.
  /// Losses and predictions are written for every job's examples; a job's words
  /// or grads (if not null) get its gradient. Throws DeviceError.
  void Run(const DeviceBatch& batch, std::span<const DeviceJob> jobs) {
    for (std::size_t j = 0; j < jobs.size(); ++j) Launch(static_cast<int>(j % lanes_.size()), batch, jobs[j]);
    for (std::size_t l = 0; l < lanes_.size(); ++l) device_.Synchronize(static_cast<int>(l));
  }

 private:
  using Index = kernels::Index;
  struct Buffer {
    void* data = nullptr;
    std::size_t bytes = 0;
  };
  // A lane's device memory, grown on demand and kept between steps.
  enum Slot {
    kImages,
    kLabels,
    kCoefficients,
    kParameters,
    kLosses,
    kPredictions,
    kDlogits,
    kGradA,
    kGradB,
    kWords,
    kGrads,
    kMagnitudes,
    kFirstActivation
  };
  struct Lane {
    std::vector<Buffer> buffers;
  };

  template <class T>
  T* Get(int lane, std::size_t slot, std::size_t count) {
    std::vector<Buffer>& buffers = lanes_[static_cast<std::size_t>(lane)].buffers;
    if (buffers.size() <= slot) buffers.resize(slot + 1);
    Buffer& b = buffers[slot];
    const std::size_t bytes = count * sizeof(T);
    if (b.bytes < bytes) {
      device_.Synchronize(lane);  // the old buffer may still be in use by queued work
      if (b.data) device_.Free(lane, b.data);
      b.data = nullptr, b.bytes = 0;
      b.data = device_.Allocate(lane, bytes);
      b.bytes = bytes;
    }
    return static_cast<T*>(b.data);
  }

  void Launch(int lane, const DeviceBatch& batch, const DeviceJob& job) {
    const Index n = job.count;
    const bool backward = job.words != nullptr || job.grads != nullptr;
    const Index values = plan_.parameter_values();
    if (n == 0) {
      if (job.words) std::memset(job.words, 0, sizeof(std::int64_t) * static_cast<std::size_t>(values * kExactWords));
      if (job.grads) std::memset(job.grads, 0, sizeof(float) * static_cast<std::size_t>(values));
      if (job.magnitudes) std::memset(job.magnitudes, 0, sizeof(float) * static_cast<std::size_t>(values));
      return;
    }
    const auto count = static_cast<std::size_t>(n);
    const auto example = static_cast<std::size_t>(plan_.example_size);
    const auto classes = static_cast<std::size_t>(plan_.classes);
    float* images = Get<float>(lane, kImages, count * example);
    std::int32_t* labels = Get<std::int32_t>(lane, kLabels, count);
    float* parameters = Get<float>(lane, kParameters, static_cast<std::size_t>(values));
    device_.CopyIn(lane, images, batch.images + job.begin * plan_.example_size, sizeof(float) * count * example);
    device_.CopyIn(lane, labels, batch.labels + job.begin, sizeof(std::int32_t) * count);
    device_.CopyIn(lane, parameters, job.parameters, sizeof(float) * static_cast<std::size_t>(values));
    float* coefficients = nullptr;
    if (backward) {
      coefficients = Get<float>(lane, kCoefficients, count);
      device_.CopyIn(lane, coefficients, batch.coefficients + job.begin, sizeof(float) * count);
    }
    auto param = [&](std::size_t p) { return parameters + plan_.parameter_offsets[p]; };

    // Forward. activations[l] is layer l's input; a reshape passes its input on.
    std::vector<float*> activations{images};
    std::vector<Index*> argmax(plan_.layers.size(), nullptr);
    std::vector<std::uint8_t*> keep(plan_.layers.size(), nullptr);  // Dropout's masks on the device
    for (std::size_t l = 0; l < plan_.layers.size(); ++l) {
      const DeviceLayer& layer = plan_.layers[l];
      float* x = activations.back();
      const std::uint8_t* host_keep =
          layer.kind == DeviceLayer::Kind::kDropout && layer.dropout < job.dropout_keep.size()
              ? job.dropout_keep[layer.dropout]
              : nullptr;
      if (layer.kind == DeviceLayer::Kind::kReshape || (layer.kind == DeviceLayer::Kind::kDropout && !host_keep)) {
        activations.push_back(x);
        continue;
      }
      float* y = Get<float>(lane, kFirstActivation + 2 * l, count * static_cast<std::size_t>(layer.out_size()));
      activations.push_back(y);
      switch (layer.kind) {
        case DeviceLayer::Kind::kConv: {
          const kernels::ConvShape s = Shape(layer, n);
          device_.Launch(lane, s.outputs(),
                         kernels::ConvForward{s, x, param(layer.parameter), param(layer.parameter + 1), y});
          break;
        }
        case DeviceLayer::Kind::kPool: {
          argmax[l] =
              Get<Index>(lane, kFirstActivation + 2 * l + 1, count * static_cast<std::size_t>(layer.out_size()));
          const kernels::PoolForward k{n, layer.in_h, layer.in_w, layer.in_c, x, y, argmax[l]};
          device_.Launch(lane, k.outputs(), k);
          break;
        }
        case DeviceLayer::Kind::kDense:
          device_.Launch(lane, n * layer.out_c,
                         kernels::DenseForward{n, layer.in_size(), layer.out_c, layer.relu, x, param(layer.parameter),
                                               param(layer.parameter + 1), y});
          break;
        case DeviceLayer::Kind::kDropout: {
          const std::size_t size = count * static_cast<std::size_t>(layer.in_size());
          keep[l] = Get<std::uint8_t>(lane, kFirstActivation + 2 * l + 1, size);
          device_.CopyIn(lane, keep[l], host_keep, size);
          device_.Launch(lane, n * layer.in_size(), kernels::DropoutApply{x, keep[l], layer.dropout_scale, y});
          break;
        }
        case DeviceLayer::Kind::kReshape:
          break;
      }
    }

    float* losses = Get<float>(lane, kLosses, count);
    std::int32_t* predictions = Get<std::int32_t>(lane, kPredictions, count);
    float* dlogits = backward ? Get<float>(lane, kDlogits, count * classes) : nullptr;
    device_.Launch(lane, n,
                   kernels::SoftmaxCrossEntropy{plan_.classes, activations.back(), labels, coefficients, losses,
                                                predictions, dlogits});
    device_.CopyOut(lane, batch.losses + job.begin, losses, sizeof(float) * count);
    device_.CopyOut(lane, batch.predictions + job.begin, predictions, sizeof(std::int32_t) * count);
    if (!backward) return;

    // Backward: dy ping-pongs between two buffers as big as the largest activation.
    std::size_t largest = 0;
    for (const DeviceLayer& layer : plan_.layers)
      largest = std::max(largest, static_cast<std::size_t>(std::max(layer.in_size(), layer.out_size())));
    float* ping[2] = {Get<float>(lane, kGradA, count * largest), Get<float>(lane, kGradB, count * largest)};
    std::int64_t* words =
        job.words ? Get<std::int64_t>(lane, kWords, static_cast<std::size_t>(values * kExactWords)) : nullptr;
    float* grads = job.grads ? Get<float>(lane, kGrads, static_cast<std::size_t>(values)) : nullptr;
    float* magnitudes = job.magnitudes ? Get<float>(lane, kMagnitudes, static_cast<std::size_t>(values)) : nullptr;
    auto at = [&](std::size_t p) {
      const Index offset = plan_.parameter_offsets[p];
      return kernels::GradientOutput{words ? words + offset * kExactWords : nullptr, grads ? grads + offset : nullptr,
                                     magnitudes ? magnitudes + offset : nullptr};
    };
    float* dy = dlogits;
    for (std::size_t l = plan_.layers.size(); l-- > 0;) {
      const DeviceLayer& layer = plan_.layers[l];
      float* x = activations[l];
      float* dx = l == 0 ? nullptr : (dy == ping[0] ? ping[1] : ping[0]);
      switch (layer.kind) {
        case DeviceLayer::Kind::kReshape:
          dx = dy;
          break;
        case DeviceLayer::Kind::kDropout:
          if (!keep[l]) {
            dx = dy;  // the identity
          } else if (dx) {
            device_.Launch(lane, n * layer.in_size(), kernels::DropoutApply{dy, keep[l], layer.dropout_scale, dx});
          }
          break;
        case DeviceLayer::Kind::kPool:
          if (!dx) break;
          device_.Launch(lane, n * layer.in_size(), kernels::Fill{dx, 0.0f});
          device_.Launch(lane, n * layer.out_size(), kernels::PoolInputGradient{dy, argmax[l], dx});
          break;
        case DeviceLayer::Kind::kConv: {
          const kernels::ConvShape s = Shape(layer, n);
          if (layer.relu) device_.Launch(lane, s.outputs(), kernels::ReluGradient{activations[l + 1], dy});
          device_.Launch(lane, s.kernel_size(), kernels::ConvKernelGradient{s, x, dy, at(layer.parameter)});
          device_.Launch(
              lane, s.filters,
              kernels::BiasGradient{n, s.out_height() * s.out_width(), s.filters, dy, at(layer.parameter + 1)});
          if (dx) device_.Launch(lane, s.inputs(), kernels::ConvInputGradient{s, dy, param(layer.parameter), dx});
          break;
        }
        case DeviceLayer::Kind::kDense: {
          const Index inputs = layer.in_size(), units = layer.out_c;
          if (layer.relu) device_.Launch(lane, n * units, kernels::ReluGradient{activations[l + 1], dy});
          device_.Launch(lane, inputs * units,
                         kernels::DenseKernelGradient{n, inputs, units, x, dy, at(layer.parameter)});
          device_.Launch(lane, units, kernels::BiasGradient{n, 1, units, dy, at(layer.parameter + 1)});
          if (dx)
            device_.Launch(lane, n * inputs,
                           kernels::DenseInputGradient{n, inputs, units, dy, param(layer.parameter), dx});
          break;
        }
      }
      dy = dx;
    }
    if (words)
      device_.CopyOut(lane, job.words, words, sizeof(std::int64_t) * static_cast<std::size_t>(values * kExactWords));
    if (grads) device_.CopyOut(lane, job.grads, grads, sizeof(float) * static_cast<std::size_t>(values));
    if (magnitudes) device_.CopyOut(lane, job.magnitudes, magnitudes, sizeof(float) * static_cast<std::size_t>(values));
  }

  static kernels::ConvShape Shape(const DeviceLayer& layer, Index n) {
    return {n, layer.in_h, layer.in_w, layer.in_c, layer.kernel_h, layer.kernel_w, layer.out_c, layer.relu};
  }

  DevicePlan plan_;
  Device device_;
  std::vector<Lane> lanes_;
};

}  // namespace dtlab
