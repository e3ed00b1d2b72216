#include "sim/engines/fault_injector.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <limits>
#include <thread>

#include "core/exact_sum.h"
#include "core/text.h"

namespace dtlab {

FaultInjector::FaultInjector(std::vector<FaultSpec> faults, const Sequential<float>& model, std::int32_t replicas,
                             double collective_timeout_seconds)
    : faults_(std::move(faults)), model_(model), replicas_(replicas), timeout_seconds_(collective_timeout_seconds) {}

Status FaultInjector::CheckAgainstModel(const std::vector<FaultSpec>& faults, const Sequential<float>& model) {
  const auto& params = model.parameters();
  const auto& layers = model.layers();
  for (const FaultSpec& fault : faults) {
    if (fault.kind == FaultKind::kThrow && !fault.layer.empty() &&
        std::none_of(layers.begin(), layers.end(), [&](const auto& l) { return l->name() == fault.layer; })) {
      return Status::InvalidArgument("fault " + FaultSpecText(fault) + ": the model has no layer '" + fault.layer +
                                     "' (layers: " + JoinText(layers, ", ", [](const auto& l) { return l->name(); }) +
                                     ")");
    }
    if (fault.kind == FaultKind::kNonFinite && !fault.variable.empty() &&
        std::none_of(params.begin(), params.end(), [&](const auto& p) { return p.name == fault.variable; })) {
      return Status::InvalidArgument(
          "fault " + FaultSpecText(fault) + ": the model has no variable '" + fault.variable +
          "' (variables: " + JoinText(params, ", ", [](const auto& p) { return p.name; }) + ")");
    }
  }
  return Status::Ok();
}

Status FaultInjector::BeginStep(std::int64_t step, std::vector<double>& straggler_seconds) {
  const std::int32_t n = replicas_;
  messages_.failure.clear();
  messages_.step = step;
  messages_.dead.assign(static_cast<std::size_t>(n), 0);
  messages_.messages.clear();
  messages_.timeout_seconds = timeout_seconds_;
  injected_nan_.clear();
  char timeout[32];
  std::snprintf(timeout, sizeof timeout, "%g", timeout_seconds_);
  for (const FaultSpec& fault : faults_) {
    const auto r = static_cast<std::size_t>(fault.replica);
    if (fault.kind == FaultKind::kDie && fault.step <= step) {
      messages_.dead[r] = 1;
      if (n == 1)
        return Status::Runtime("step " + std::to_string(step) +
                               ": replica 0, the only one, stopped responding (fault " + FaultSpecText(fault) + ")");
    }
    if (fault.step != step) continue;
    if (fault.kind == FaultKind::kDrop || fault.kind == FaultKind::kCorrupt) {
      messages_.messages.push_back(fault);
    } else if (fault.kind == FaultKind::kStraggler) {
      if (fault.seconds > timeout_seconds_ && n > 1) {
        char late[32];
        std::snprintf(late, sizeof late, "%g", fault.seconds);
        return Status::Runtime("step " + std::to_string(step) + ": the collective timed out after " + timeout +
                               " s waiting for replica " + std::to_string(fault.replica) +
                               ", a straggler whose compute took " + late + " s longer (fault " + FaultSpecText(fault) +
                               "); raise --collective-timeout to wait longer");
      }
      straggler_seconds.resize(static_cast<std::size_t>(n), 0.0);
      straggler_seconds[r] += fault.seconds;
    }
  }
  return Status::Ok();
}

void FaultInjector::BeginRealStep(std::int64_t step, std::int32_t first, std::int32_t end, std::int32_t rank) const {
  for (const FaultSpec& fault : faults_) {
    if (fault.step != step || fault.replica < first || fault.replica >= end) continue;
    if (fault.kind == FaultKind::kDie) {
      std::fprintf(stderr, "fault %s: rank %d kills itself with SIGKILL at step %lld\n", FaultSpecText(fault).c_str(),
                   rank, static_cast<long long>(step));
      std::fflush(stderr);
      std::raise(SIGKILL);
    }
    if (fault.kind == FaultKind::kStraggler) std::this_thread::sleep_for(std::chrono::duration<double>(fault.seconds));
  }
}

Status FaultInjector::CollectiveStatus(const std::string& collective, std::int64_t step) const {
  if (!messages_.failed()) return Status::Ok();
  return Status::Runtime(collective + " at step " + std::to_string(step) + ": " + messages_.failure);
}

Status FaultInjector::Thrown(std::int32_t replica, std::int64_t step) const {
  for (const FaultSpec& fault : faults_)
    if (fault.kind == FaultKind::kThrow && fault.replica == replica && fault.step == step) {
      const std::string layer = fault.layer.empty() ? std::string(model_.layers().front()->name()) : fault.layer;
      return Status::Runtime("step " + std::to_string(step) + ": replica " + std::to_string(replica) +
                             " raised an exception in layer '" + layer + "' (fault " + FaultSpecText(fault) +
                             "); the step was not applied");
    }
  return Status::Ok();
}

std::size_t FaultInjector::NonFiniteOffset(const FaultSpec& fault, std::size_t& variable) const {
  const auto& params = model_.parameters();
  variable = 0;
  for (std::size_t p = 0; p < params.size(); ++p)
    if (params[p].name == fault.variable) variable = p;
  std::size_t offset = 0;
  for (std::size_t p = 0; p < variable; ++p) offset += static_cast<std::size_t>(NumElements(params[p].spec.shape));
  return offset;
}

// The engine's compute, then the step's throw faults (in replica order, the first
// one stops the step) and nan faults.
class FaultInjector::Compute final : public ComputeBackend {
 public:
  Compute(FaultInjector& faults, ComputeBackend& base, std::int32_t first, std::int64_t step)
      : faults_(faults), base_(base), first_(first), step_(step) {}
  std::string Description() const override { return base_.Description(); }
  void SetDropoutStep(const DropoutStep& step) override { base_.SetDropoutStep(step); }

  Status Run(const Tensor<float>& images, std::span<const std::int32_t> labels, std::span<const float> coefficients,
             std::span<float> per_example_loss, std::span<std::int32_t> predictions,
             std::span<const BatchSegment> segments) override {
    DTLAB_RETURN_IF_ERROR(base_.Run(images, labels, coefficients, per_example_loss, predictions, segments));
    DTLAB_RETURN_IF_ERROR(Thrown(segments.size()));
    Inject(segments.size(), [&](std::size_t k, std::size_t variable, std::size_t, bool infinity) {
      (*segments[k].grads)[variable].data()[0] =
          infinity ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    });
    return Status::Ok();
  }
  Status RunExact(const Tensor<float>& images, std::span<const std::int32_t> labels,
                  std::span<const float> coefficients, std::span<float> per_example_loss,
                  std::span<std::int32_t> predictions, std::span<const ExactSegment> segments) override {
    DTLAB_RETURN_IF_ERROR(base_.RunExact(images, labels, coefficients, per_example_loss, predictions, segments));
    DTLAB_RETURN_IF_ERROR(Thrown(segments.size()));
    // An accumulator's last word counts the non-finite terms added to it.
    Inject(segments.size(), [&](std::size_t k, std::size_t, std::size_t offset, bool infinity) {
      segments[k].grad_words[offset * kExactWords + kExactDigitWords] += infinity ? kExactPosInfUnit : kExactNanUnit;
    });
    return Status::Ok();
  }

 private:
  Status Thrown(std::size_t count) const {
    for (std::size_t k = 0; k < count; ++k)
      DTLAB_RETURN_IF_ERROR(faults_.Thrown(first_ + static_cast<std::int32_t>(k), step_));
    return Status::Ok();
  }
  template <typename Put>
  void Inject(std::size_t count, Put put) {
    for (const FaultSpec& fault : faults_.faults_) {
      const std::int32_t k = fault.replica - first_;
      if (fault.kind != FaultKind::kNonFinite || fault.step != step_ || k < 0 || k >= static_cast<std::int32_t>(count))
        continue;  // another step, or another worker's replica
      std::size_t variable = 0;
      const std::size_t offset = faults_.NonFiniteOffset(fault, variable);
      put(static_cast<std::size_t>(k), variable, offset, fault.infinity);
      faults_.injected_nan_ = FaultSpecText(fault);
    }
  }

  FaultInjector& faults_;
  ComputeBackend& base_;
  std::int32_t first_;
  std::int64_t step_;
};

std::unique_ptr<ComputeBackend> FaultInjector::WrapCompute(ComputeBackend& base, std::int32_t first_replica,
                                                           std::int64_t step) {
  return std::make_unique<Compute>(*this, base, first_replica, step);
}

}  // namespace dtlab
