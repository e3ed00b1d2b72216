#include "sim/compute/device_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/conv2d.h"
#include "core/dense.h"
#include "core/dropout.h"
#include "core/half_precision.h"
#include "core/pooling.h"
#include "core/reshape.h"

namespace dtlab {

StatusOr<DevicePlan> MakeDevicePlan(const Sequential<float>& model) {
  if (model.compute_type() != ComputeType::kFloat32)
    return Status::InvalidArgument("--precision mixed_" + std::string(ComputeTypeName(model.compute_type())) +
                                   " with --backend cuda or emulated: the device kernels compute in float32 and do "
                                   "not round to the half type at the layer boundaries; use --backend cpu "
                                   "(docs/mixed_precision.md)");
  DevicePlan plan;
  plan.example_size = NumElements(model.example_shape());
  plan.classes = model.num_classes();
  plan.parameter_offsets.push_back(0);
  for (const ModelParameter& p : model.parameters())
    plan.parameter_offsets.push_back(plan.parameter_offsets.back() + NumElements(p.spec.shape));
  Shape shape = model.example_shape();
  std::size_t parameter = 0, dropouts = 0;
  auto dims = [](const Shape& s, std::int64_t& h, std::int64_t& w, std::int64_t& c) {
    h = s.size() == 3 ? s[0] : 1;
    w = s.size() == 3 ? s[1] : 1;
    c = s.size() == 3 ? s[2] : NumElements(s);
  };
  for (const auto& layer : model.layers()) {
    DeviceLayer d;
    dims(shape, d.in_h, d.in_w, d.in_c);
    const Shape out = layer->OutputShape(shape);
    dims(out, d.out_h, d.out_w, d.out_c);
    const std::string unsupported = "layer " + layer->name() + " (" + std::string(layer->kind()) + ") ";
    if (const auto* conv = dynamic_cast<const Conv2D<float>*>(layer.get())) {
      if (shape.size() != 3) return Status::InvalidArgument("layer " + layer->name() + ": Conv2D needs HWC inputs");
      if (!conv->unit_stride_valid())
        return Status::InvalidArgument(unsupported +
                                       "has strides or same padding, which the device kernels do not run (they run "
                                       "Conv2D with stride 1 and valid padding); use --backend cpu");
      d.kind = DeviceLayer::Kind::kConv;
      d.kernel_h = conv->kernel_height(), d.kernel_w = conv->kernel_width();
      d.relu = conv->activation() == Activation::kRelu;
    } else if (const auto* dense = dynamic_cast<const Dense<float>*>(layer.get())) {
      d.kind = DeviceLayer::Kind::kDense;
      d.in_h = d.in_w = 1, d.in_c = NumElements(shape);
      d.relu = dense->activation() == Activation::kRelu;
    } else if (const auto* pool = dynamic_cast<const MaxPooling2D<float>*>(layer.get())) {
      if (!pool->options().IsDefault())
        return Status::InvalidArgument(unsupported +
                                       "pools other than 2x2 windows with stride 2 and valid padding, which the "
                                       "device kernels do not run; use --backend cpu");
      d.kind = DeviceLayer::Kind::kPool;
    } else if (dynamic_cast<const Reshape<float>*>(layer.get())) {
      d.kind = DeviceLayer::Kind::kReshape;
    } else if (const auto* dropout = dynamic_cast<const Dropout<float>*>(layer.get())) {
      d.kind = DeviceLayer::Kind::kDropout;
      d.dropout = dropouts++;
      d.dropout_scale = DropoutScale<float>(dropout->rate());
    } else {
      return Status::InvalidArgument(unsupported +
                                     "has no device kernel; the device backends run Conv2D, MaxPooling2D, "
                                     "Flatten, Reshape, Dense and Dropout (use --backend cpu)");
    }
    d.parameter = parameter;
    parameter += layer->Parameters(shape).size();
    plan.layers.push_back(d);
    shape = out;
  }
  return plan;
}

namespace {

// The emulated device: host memory, copies as memcpy, a launch as a parallel loop.
// Its lanes are what streams are on a GPU (each has its own buffers in the
// runner), run one after the other.
class HostDevice {
 public:
  explicit HostDevice(int lanes) : lanes_(lanes) {}
  int lanes() const { return lanes_; }
  void* Allocate(int /*lane*/, std::size_t bytes) {
    void* p = std::malloc(std::max<std::size_t>(bytes, 1));
    if (!p) throw DeviceError("out of host memory allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void Free(int /*lane*/, void* p) { std::free(p); }
  void CopyIn(int /*lane*/, void* device, const void* host, std::size_t bytes) { std::memcpy(device, host, bytes); }
  void CopyOut(int /*lane*/, void* host, const void* device, std::size_t bytes) { std::memcpy(host, device, bytes); }
  template <class Kernel>
  void Launch(int /*lane*/, kernels::Index n, const Kernel& kernel) {
    tbb::parallel_for(tbb::blocked_range<kernels::Index>(0, n, 64), [&](const tbb::blocked_range<kernels::Index>& r) {
      for (kernels::Index i = r.begin(); i < r.end(); ++i) kernel(i);
    });
  }
  void Synchronize(int /*lane*/) {}

 private:
  int lanes_;
};

class HostRunner final : public DeviceRunner {
 public:
  HostRunner(DevicePlan plan, int lanes) : runner_(std::move(plan), HostDevice(lanes)), lanes_(lanes) {}
  std::string Description() const override {
    return "emulated: the device kernels on the CPU, " + std::to_string(lanes_) + " lane" + (lanes_ == 1 ? "" : "s");
  }
  void Run(const DeviceBatch& batch, std::span<const DeviceJob> jobs) override { runner_.Run(batch, jobs); }

 private:
  DeviceRunnerOn<HostDevice> runner_;
  int lanes_;
};

class DeviceBackend final : public ComputeBackend {
 public:
  DeviceBackend(const Sequential<float>& model, std::unique_ptr<DeviceRunner> runner)
      : model_(model), runner_(std::move(runner)) {
    Shape shape = model.example_shape();
    for (std::size_t l = 0; l < model.layers().size(); ++l) {
      if (const auto* dropout = dynamic_cast<const Dropout<float>*>(model.layers()[l].get()))
        dropouts_.push_back({l, dropout->rate(), NumElements(shape)});
      shape = model.layers()[l]->OutputShape(shape);
    }
  }
  std::string Description() const override { return runner_->Description(); }
  void SetDropoutStep(const DropoutStep& step) override { dropout_step_ = step; }

  Status Run(const Tensor<float>& images, std::span<const std::int32_t> labels, std::span<const float> coefficients,
             std::span<float> per_example_loss, std::span<std::int32_t> predictions,
             std::span<const BatchSegment> segments) override {
    const std::size_t values = static_cast<std::size_t>(model_.num_parameter_values());
    Prepare(segments.size(), values, false);
    std::vector<DeviceJob> jobs;
    for (std::size_t s = 0; s < segments.size(); ++s) {
      const BatchSegment& seg = segments[s];
      DeviceJob job;
      job.parameters = Flatten(*seg.params, s), job.begin = seg.begin, job.count = seg.count;
      if (seg.grads) {  // a training pass: Dropout drops
        job.dropout_keep = DrawMasks(s, seg.begin, seg.count);
        job.grads = grads_[s].data();
      }
      if (seg.magnitudes) job.magnitudes = magnitudes_[s].data();
      jobs.push_back(job);
    }
    DTLAB_RETURN_IF_ERROR(Launch(images, labels, coefficients, per_example_loss, predictions, jobs));
    for (std::size_t s = 0; s < segments.size(); ++s) {
      if (segments[s].grads) Unflatten(grads_[s], *segments[s].grads);
      if (segments[s].magnitudes) Unflatten(magnitudes_[s], *segments[s].magnitudes);
    }
    return Status::Ok();
  }

  Status RunExact(const Tensor<float>& images, std::span<const std::int32_t> labels,
                  std::span<const float> coefficients, std::span<float> per_example_loss,
                  std::span<std::int32_t> predictions, std::span<const ExactSegment> segments) override {
    const std::size_t values = static_cast<std::size_t>(model_.num_parameter_values());
    Prepare(segments.size(), values, true);
    std::vector<DeviceJob> jobs;
    for (std::size_t s = 0; s < segments.size(); ++s) {
      const ExactSegment& seg = segments[s];
      DeviceJob job;
      job.parameters = Flatten(*seg.params, s), job.begin = seg.begin, job.count = seg.count;
      if (!seg.grad_words.empty()) {  // a training pass: Dropout drops
        job.dropout_keep = DrawMasks(s, seg.begin, seg.count);
        job.words = seg.grad_words.data();
      }
      jobs.push_back(job);
    }
    DTLAB_RETURN_IF_ERROR(Launch(images, labels, coefficients, per_example_loss, predictions, jobs));
    for (const ExactSegment& seg : segments) {
      if (seg.regularization != 0.0f && !seg.grad_words.empty())
        AddRegularizationWords(model_, *seg.params, seg.regularization, seg.grad_words);
      if (!seg.rounded.empty()) RoundWords(seg.grad_words, seg.rounded);
    }
    return Status::Ok();
  }

 private:
  // A training step's Dropout masks for segment s (examples [begin, begin + count)),
  // drawn as BatchRunner's layers draw them (the streams of BatchRunner::
  // SetForwardContext); one per Dropout layer, null where the rate is 0.
  std::span<const std::uint8_t* const> DrawMasks(std::size_t s, std::int64_t begin, std::int64_t count) {
    if (dropouts_.empty()) return {};
    if (masks_.size() <= s) masks_.resize(s + 1), mask_pointers_.resize(s + 1);
    masks_[s].resize(dropouts_.size());
    mask_pointers_[s].assign(dropouts_.size(), nullptr);
    for (std::size_t d = 0; d < dropouts_.size(); ++d) {
      const DropoutLayer& layer = dropouts_[d];
      if (layer.rate == 0.0) continue;
      std::vector<std::uint8_t>& mask = masks_[s][d];
      mask.resize(static_cast<std::size_t>(count * layer.width));
      const std::uint64_t key = DropoutStreamKey(dropout_step_.seed, dropout_step_.step, layer.index);
      for (std::int64_t i = 0; i < count; ++i)
        DrawDropoutMask(key, dropout_step_.StreamOf(s, begin + i, i), layer.rate, layer.width,
                        mask.data() + i * layer.width);
      mask_pointers_[s][d] = mask.data();
    }
    return mask_pointers_[s];
  }

  void Prepare(std::size_t segments, std::size_t values, bool exact) {
    flat_.resize(segments);
    if (!exact) {
      grads_.resize(segments);
      magnitudes_.resize(segments);
      for (std::size_t s = 0; s < segments; ++s) grads_[s].resize(values), magnitudes_[s].resize(values);
    }
  }

  const float* Flatten(const ParameterList<float>& params, std::size_t s) {
    std::vector<float>& flat = flat_[s];
    flat.clear();
    for (const Tensor<float>& t : params) flat.insert(flat.end(), t.data(), t.data() + t.size());
    return flat.data();
  }

  static void Unflatten(const std::vector<float>& flat, ParameterList<float>& out) {
    std::size_t offset = 0;
    for (Tensor<float>& t : out) {
      std::copy_n(flat.data() + offset, t.size(), t.data());
      offset += static_cast<std::size_t>(t.size());
    }
  }

  Status Launch(const Tensor<float>& images, std::span<const std::int32_t> labels, std::span<const float> coefficients,
                std::span<float> per_example_loss, std::span<std::int32_t> predictions,
                const std::vector<DeviceJob>& jobs) {
    const DeviceBatch batch{images.data(), labels.data(), coefficients.empty() ? nullptr : coefficients.data(),
                            per_example_loss.data(), predictions.data()};
    try {
      runner_->Run(batch, jobs);
    } catch (const DeviceError& e) {
      return Status::Runtime(runner_->Description() + ": " + e.what());
    }
    return Status::Ok();
  }

  struct DropoutLayer {
    std::size_t index;  // in the model: part of the masks' key
    double rate;
    std::int64_t width;  // one example's input size
  };

  const Sequential<float>& model_;
  std::unique_ptr<DeviceRunner> runner_;
  std::vector<std::vector<float>> flat_, grads_, magnitudes_;
  std::vector<DropoutLayer> dropouts_;
  DropoutStep dropout_step_;
  std::vector<std::vector<std::vector<std::uint8_t>>> masks_;  // [segment][dropout layer]
  std::vector<std::vector<const std::uint8_t*>> mask_pointers_;
};

}  // namespace

std::unique_ptr<ComputeBackend> MakeDeviceBackend(const Sequential<float>& model,
                                                  std::unique_ptr<DeviceRunner> runner) {
  return std::make_unique<DeviceBackend>(model, std::move(runner));
}

std::unique_ptr<DeviceRunner> MakeHostRunner(DevicePlan plan, int lanes) {
  return std::make_unique<HostRunner>(std::move(plan), std::max(lanes, 1));
}

}  // namespace dtlab
