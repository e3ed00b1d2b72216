// ReferenceStep: the one-device reference of a synchronous step (--check-reference).
// It computes the step again on one device over the whole global batch, with the
// same weights and the same loss code with num_replicas_in_sync = 1, and compares
// the distributed step's reduced gradient and loss with it (sim/engines/reference_check.h):
// within the rigorous float bound in fast mode, bit for bit in exact mode. A failed
// check carries the loss code's explanation of the pitfall (sim/engines/loss_code.h).
//
// Thread safety: not thread-safe; one engine calls it, one step at a time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/math_mode.h"
#include "core/model.h"
#include "core/tensor.h"
#include "sim/compute/batch_runner.h"
#include "sim/engines/loss_code.h"
#include "sim/engines/reference_check.h"

namespace dtlab {

class ReferenceStep {
 public:
  /// `model` must outlive the reference; `chunk_size` is the distributed step's.
  ReferenceStep(const Sequential<float>& model, std::int64_t chunk_size);

  /// What the distributed step computed, and on what.
  struct Distributed {
    const ParameterList<float>* weights = nullptr;  // the variables the step computed with
    const Tensor<float>* images = nullptr;          // the global batch, replica after replica
    std::span<const std::int32_t> labels;
    std::span<const float> per_example_loss;    // the step's, for every example
    std::span<const std::int64_t> batch_sizes;  // each replica's examples
    std::span<const float> reduced_gradient;    // flat, in parameter order
    float reduced_loss = 0;
    std::int64_t global_batch_size = 0;
    std::int64_t step = 0;
    /// Gradient accumulation (sim/engines/accumulation.h): the step summed this
    /// many micro-batches, and batch_sizes holds each one's replicas in turn
    /// (micro_batches x N entries). The bound counts the additions across them.
    std::int64_t micro_batches = 1;
    /// The keras rule: the micro-batches' sum was divided by K, one more rounding.
    bool divided_by_micro_batches = false;
    /// Why a failed step differs, as a clause starting with ": ", in place of the
    /// loss code's (empty: the loss code's explanation).
    std::string mismatch_cause;
    /// The replicas computed on a device backend (sim/compute/device_backend.h): in fast
    /// mode the reference loss is then the exact sum, rounded once.
    bool device_backend = false;
    /// Dropout's masks as the replicas drew them (the reference draws its own under
    /// the same rule, as one replica holding the whole batch).
    DropoutStep dropout;
    /// --loss-scale dynamic: the scale this step's loss was multiplied by (1: none);
    /// `reduced_gradient` is unscaled.
    float loss_scale = 1.0f;
  };
  /// Compares `step` with the reference under `loss` and `math`; sets the
  /// gradients' L2 norms.
  StepCheck Check(const LossCode& loss, MathMode math, const Distributed& step);

 private:
  // The reference's coefficients (the loss code with N = 1 on the whole batch) and
  // cleared output buffers; returns its loss denominator.
  std::int64_t Prepare(const LossCode& loss, const Distributed& step);
  StepCheck CheckFast(const LossCode& loss, const Distributed& step);
  StepCheck CheckExact(const LossCode& loss, MathMode math, const Distributed& step);
  // Why a failed check may be Dropout's doing (per-replica masks), or "".
  std::string DropoutCause(const Distributed& step) const;
  // Why it may be BatchNormalization's (per-replica statistics), or "".
  std::string BatchNormCause(const Distributed& step) const;

  const Sequential<float>& model_;
  BatchRunner runner_;
  ParameterList<float> grads_, magnitudes_;
  std::vector<float> losses_, coefficients_;
  std::vector<std::int32_t> predictions_;
  std::vector<std::int64_t> words_;
};

}  // namespace dtlab
