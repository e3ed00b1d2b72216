#include "core/optimizer.h"

#include <cmath>

namespace dtlab {
namespace {

// The update loops take restrict pointers: parameters, gradients and slots never
// overlap, so the compiler can vectorize them (the same operations per element, so
// the same bits as one element at a time).

class Sgd final : public Optimizer {
 public:
  explicit Sgd(float momentum) : momentum_(momentum) {}
  std::string_view name() const override { return "sgd"; }
  float default_learning_rate() const override { return 0.01f; }
  std::vector<std::string> SlotNames() const override {
    return momentum_ != 0.0f ? std::vector<std::string>{"momentum"} : std::vector<std::string>{};
  }
  StepConstants BeginStep(float lr) const override { return {lr, 0.0f}; }
  void UpdateElements(const StepConstants& step, std::size_t p, std::int64_t begin, std::int64_t end, float* weights,
                      const float* gradient) override {
    float* __restrict w = weights;
    const float* __restrict g = gradient;
    const float lr = step.learning_rate;
    if (momentum_ == 0.0f) {
      for (std::int64_t i = begin; i < end; ++i) w[i] -= g[i] * lr;
      return;
    }
    float* __restrict m = slots_[0][p].data();
    const float momentum = momentum_;
    for (std::int64_t i = begin; i < end; ++i) {
      m[i] = m[i] * momentum - g[i] * lr;
      w[i] += m[i];
    }
  }

 private:
  float momentum_;
};

class Adam final : public Optimizer {
 public:
  std::string_view name() const override { return "adam"; }
  float default_learning_rate() const override { return 1e-3f; }
  std::vector<std::string> SlotNames() const override { return {"m", "v"}; }
  StepConstants BeginStep(float lr) const override {
    const float beta_1 = 0.9f, beta_2 = 0.999f;
    const float local_step = static_cast<float>(iterations_ + 1);
    const float beta_1_power = std::pow(beta_1, local_step);
    const float beta_2_power = std::pow(beta_2, local_step);
    return {lr, lr * std::sqrt(1.0f - beta_2_power) / (1.0f - beta_1_power)};
  }
  void UpdateElements(const StepConstants& step, std::size_t p, std::int64_t begin, std::int64_t end, float* weights,
                      const float* gradient) override {
    // Keras casts its Python-double constants to float32: 1 - 0.9 becomes 0.1f.
    const float epsilon = 1e-7f;
    const float one_minus_beta_1 = static_cast<float>(1.0 - 0.9);
    const float one_minus_beta_2 = static_cast<float>(1.0 - 0.999);
    const float alpha = step.alpha;
    float* __restrict w = weights;
    const float* __restrict g = gradient;
    float* __restrict m = slots_[0][p].data();
    float* __restrict v = slots_[1][p].data();
    for (std::int64_t i = begin; i < end; ++i) {
      m[i] += (g[i] - m[i]) * one_minus_beta_1;
      v[i] += (g[i] * g[i] - v[i]) * one_minus_beta_2;
      w[i] -= (m[i] * alpha) / (std::sqrt(v[i]) + epsilon);
    }
  }
};

class RmsProp final : public Optimizer {
 public:
  std::string_view name() const override { return "rmsprop"; }
  float default_learning_rate() const override { return 1e-3f; }
  std::vector<std::string> SlotNames() const override { return {"velocity"}; }
  StepConstants BeginStep(float lr) const override { return {lr, 0.0f}; }
  void UpdateElements(const StepConstants& step, std::size_t p, std::int64_t begin, std::int64_t end, float* weights,
                      const float* gradient) override {
    const float rho = 0.9f, epsilon = 1e-7f;
    const float one_minus_rho = static_cast<float>(1.0 - 0.9);
    const float lr = step.learning_rate;
    float* __restrict w = weights;
    const float* __restrict g = gradient;
    float* __restrict v = slots_[0][p].data();
    for (std::int64_t i = begin; i < end; ++i) {
      v[i] = rho * v[i] + one_minus_rho * (g[i] * g[i]);
      w[i] -= (lr * g[i]) / std::sqrt(v[i] + epsilon);
    }
  }
};

}  // namespace

void Optimizer::Apply(std::span<Tensor<float>> params, std::span<const Tensor<float>> grads, float learning_rate) {
  const StepConstants step = BeginStep(learning_rate);
  for (std::size_t p = 0; p < params.size(); ++p)
    UpdateElements(step, p, 0, params[p].size(), params[p].data(), grads[p].data());
  EndStep();
}

void Optimizer::Build(std::span<const Tensor<float>> params) {
  slots_.assign(SlotNames().size(), {});
  for (auto& slot : slots_)
    for (const auto& p : params) slot.emplace_back(p.shape());
}

StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(std::string_view name, const OptimizerOptions& options) {
  std::unique_ptr<Optimizer> optimizer;
  if (name == "adam") {
    optimizer = std::make_unique<Adam>();
  } else if (name == "rmsprop") {
    optimizer = std::make_unique<RmsProp>();
  } else if (name == "sgd") {
    if (!(options.momentum >= 0.0f && options.momentum < 1.0f))
      return Status::InvalidArgument("--momentum must be in [0, 1), got " + std::to_string(options.momentum));
    optimizer = std::make_unique<Sgd>(options.momentum);
  } else {
    return Status::InvalidArgument("unknown optimizer '" + std::string(name) +
                                   "' (expected one of: adam, rmsprop, sgd)");
  }
  return optimizer;
}

}  // namespace dtlab
