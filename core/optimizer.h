// Optimizers with Keras 3 update rules and defaults (keras/src/optimizers/*.py).
//
//   SGD:     m = momentum*m - lr*g; w += m          (momentum 0: w -= g*lr), lr 0.01
//   Adam:    m += (g-m)(1-b1); v += (g^2-v)(1-b2); a = lr*sqrt(1-b2^t)/(1-b1^t);
//            w -= (m*a)/(sqrt(v)+eps)                lr 1e-3, b1 .9, b2 .999, eps 1e-7
//   RMSprop: v = rho*v + (1-rho)*g^2; w -= (lr*g)/sqrt(v+eps)   lr 1e-3, rho .9, eps 1e-7
//
// Arithmetic is float32 in the order Keras writes it, so results match Keras up to
// the rounding of its own kernels.
//
// Every rule is elementwise, so an update can be split over threads: BeginStep
// fixes the step's constants, UpdateElements updates any slice of any parameter
// (slices may run concurrently and in any order: each element's bits are the same),
// EndStep counts the step. Apply is the three in one.
//
// Thread safety: an optimizer is owned by one replica (or the central store);
// concurrent UpdateElements calls on disjoint slices are safe, nothing else is.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace dtlab {

/// Hyperparameters; a field left at its default takes the Keras default.
struct OptimizerOptions {
  float momentum = 0.0f;  // SGD only
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// "adam", "rmsprop" or "sgd".
  virtual std::string_view name() const = 0;
  /// The Keras default learning rate of this optimizer.
  virtual float default_learning_rate() const = 0;

  /// Creates zero-filled slot variables shaped like `params`. Must be called once
  /// before Apply or before restoring slots.
  void Build(std::span<const Tensor<float>> params);

  /// One update of every parameter with its gradient, then iterations += 1.
  /// REQUIRES: Build() was called with parameters of the same shapes.
  void Apply(std::span<Tensor<float>> params, std::span<const Tensor<float>> grads, float learning_rate);

  /// The constants of the step after iterations() (Adam's bias correction, say).
  struct StepConstants {
    float learning_rate = 0.0f;
    float alpha = 0.0f;  // Adam: lr * sqrt(1 - b2^t) / (1 - b1^t)
  };
  virtual StepConstants BeginStep(float learning_rate) const = 0;
  /// Updates elements [begin, end) of parameter `param` (weights `w`, gradient `g`)
  /// and their slots. REQUIRES: Build(); 0 <= begin <= end <= the parameter's size.
  virtual void UpdateElements(const StepConstants& step, std::size_t param, std::int64_t begin, std::int64_t end,
                              float* w, const float* g) = 0;
  /// iterations += 1, once every element of the step is updated.
  void EndStep() { ++iterations_; }

  std::int64_t iterations() const { return iterations_; }
  void set_iterations(std::int64_t iterations) { iterations_ = iterations; }

  /// The names of the slot variables, e.g. {"m", "v"} for Adam (may be empty).
  virtual std::vector<std::string> SlotNames() const = 0;
  /// Slot variable `slot` (index into SlotNames()) of parameter `param`.
  Tensor<float>& slot(std::size_t slot, std::size_t param) { return slots_[slot][param]; }
  const Tensor<float>& slot(std::size_t slot, std::size_t param) const { return slots_[slot][param]; }
  std::size_t num_params() const { return slots_.empty() ? 0 : slots_[0].size(); }

 protected:
  std::vector<std::vector<Tensor<float>>> slots_;  // [slot][param]
  std::int64_t iterations_ = 0;
};

/// Creates "adam", "rmsprop" or "sgd"; InvalidArgument for any other name or for a
/// momentum outside [0, 1). The learning rate is passed to each Apply.
StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(std::string_view name, const OptimizerOptions& options);

}  // namespace dtlab
