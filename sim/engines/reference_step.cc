#include "sim/engines/reference_step.h"

#include "core/batch_norm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

namespace dtlab {
namespace {

double L2Norm(std::span<const float> values) {
  double squares = 0;
  for (const float v : values) squares += static_cast<double>(v) * v;
  return std::sqrt(squares);
}

}  // namespace

ReferenceStep::ReferenceStep(const Sequential<float>& model, std::int64_t chunk_size)
    : model_(model), runner_(model, chunk_size) {}

std::string ReferenceStep::DropoutCause(const Distributed& step) const {
  if (step.dropout.rng != DropoutRng::kPerReplica || step.batch_sizes.size() < 2) return "";
  std::string layers;
  for (const auto& layer : model_.layers())
    if (layer->kind() == "Dropout") layers += (layers.empty() ? "" : ", ") + layer->name();
  if (layers.empty()) return "";
  return "Dropout (" + layers +
         ") draws its masks per replica (--dropout-rng per-replica, as TensorFlow's per-replica generators do), so "
         "an example's mask depends on the replica it lands on and the step on the replica count; --dropout-rng "
         "keyed keys each mask by the example and equals one device";
}

std::string ReferenceStep::BatchNormCause(const Distributed& step) const {
  if (step.batch_sizes.size() < 2) return "";
  std::string layers;
  for (const auto& layer : model_.layers())
    if (const auto* bn = dynamic_cast<const BatchNormalization<float>*>(layer.get()); bn && !bn->config().synchronized)
      layers += (layers.empty() ? "" : ", ") + layer->name();
  if (layers.empty()) return "";
  return "BatchNormalization (" + layers +
         ") normalizes each replica's examples by that replica's own batch statistics (synchronized=False, Keras's "
         "default), so every example's values depend on the replicas it shares a batch with; one device normalizes "
         "by the whole global batch's. BatchNormalization(synchronized=True) all-reduces the statistics and equals "
         "one device";
}

StepCheck ReferenceStep::Check(const LossCode& loss, MathMode math, const Distributed& step) {
  DropoutStep dropout = step.dropout;
  dropout.step = step.step;
  dropout.first_replica = 0;  // one device: replica 0 holds the whole batch
  runner_.set_dropout_step(dropout);
  StepCheck check = math == MathMode::kExact ? CheckExact(loss, math, step) : CheckFast(loss, step);
  if (!check.within_bound) {
    std::string cause = BatchNormCause(step);
    if (cause.empty()) cause = DropoutCause(step);
    if (!cause.empty()) check.explanation = cause;  // the other symptoms (per-example losses differ) follow from it
  }
  check.distributed_norm = L2Norm(step.reduced_gradient);
  double squares = 0;
  for (const auto& variable : grads_) squares += std::pow(L2Norm(variable.span()), 2);
  check.reference_norm = std::sqrt(squares);
  return check;
}

std::int64_t ReferenceStep::Prepare(const LossCode& loss, const Distributed& step) {
  const auto total = static_cast<std::int64_t>(step.labels.size());
  coefficients_.assign(step.labels.size(), 0.0f);
  const std::int64_t denominator =
      loss.ReplicaCoefficients(total, step.global_batch_size, 1, coefficients_).denominator;
  losses_.assign(step.labels.size(), 0.0f);
  predictions_.assign(step.labels.size(), 0);
  return denominator;
}

namespace {

std::string ReferenceOverflowCause(ComputeType half, float scale, std::int64_t replicas) {
  char text[400];
  std::snprintf(text, sizeof text,
                "one device's gradient on the whole global batch overflowed %s at loss scale %g (one device would "
                "skip this step and halve its scale), while each of the %lld replicas' gradients, about a 1/%lld "
                "share, fit and their float32 sum is finite: %lld replicas tolerate a loss scale about %lld times "
                "larger than one device",
                std::string(ComputeTypeName(half)).c_str(), static_cast<double>(scale),
                static_cast<long long>(replicas), static_cast<long long>(replicas), static_cast<long long>(replicas),
                static_cast<long long>(replicas));
  return text;
}

}  // namespace

StepCheck ReferenceStep::CheckFast(const LossCode& loss, const Distributed& step) {
  // One device on the whole global batch, same weights, the same loss code with N = 1.
  const ParameterList<float>& weights = *step.weights;
  const auto total = static_cast<std::int64_t>(step.labels.size());
  const std::int64_t denominator = Prepare(loss, step);
  if (grads_.empty()) {
    grads_ = model_.ZeroParameters();
    magnitudes_ = model_.ZeroParameters();
  }
  // A loss scale and a half policy: as a replica computes (Cluster::ComputeReplicas):
  // the scaled loss, the gradient rounded to the half type before the (scaled)
  // regularization, then unscaled; the magnitudes unscaled alike.
  const float scale = step.loss_scale;
  if (scale != 1.0f)
    for (float& c : coefficients_) c *= scale;
  const BatchSegment whole{&weights, 0, total, &grads_, &magnitudes_};
  runner_.Run(*step.images, step.labels, coefficients_, losses_, predictions_, std::span(&whole, 1));
  const ComputeType half = model_.compute_type();
  bool reference_overflowed = false;  // one device's half gradient held an inf or a NaN
  if (half != ComputeType::kFloat32)
    for (Tensor<float>& g : grads_) {
      RoundToComputeType(g.span(), half);
      for (const float v : g.span()) reference_overflowed |= !std::isfinite(v);
    }
  model_.AddRegularizationGradient(weights, scale, grads_);
  if (scale != 1.0f) {
    for (Tensor<float>& g : grads_)
      for (float& v : g.span()) v /= scale;
    for (Tensor<float>& m : magnitudes_)
      for (float& v : m.span()) v /= scale;
    for (float& c : coefficients_) c /= scale;
  }
  float reference_loss = ComputeAverageLoss<float>(losses_, {}, denominator) + model_.RegularizationLoss(weights);
  if (step.device_backend) {
    // A device backend sums over examples its own way (exact mode's per-example
    // terms, the same per-example values as the CPU's): the reference is then their
    // exact sum, rounded once, whose error is below any of the chains the bound
    // already counts. The magnitudes stay the CPU's (the bound is widened by 1% for
    // such differences).
    reference_loss =
        runner_.ExactGradient(weights, *step.images, step.labels, coefficients_, losses_, predictions_, words_, grads_);
  }

  StepCheck check;
  check.step = step.step;
  check.per_example_values_identical =
      std::memcmp(losses_.data(), step.per_example_loss.data(), sizeof(float) * step.per_example_loss.size()) == 0;

  // Chain lengths (see reference_check.h): every term, each chunk counted as
  // chunk_size rows (at least its own; the runner pads none), the chunk sums, the
  // replica sums, and a few single operations (regularization, scaling).
  const std::int64_t chunk = runner_.chunk_size();
  auto padded = [&](std::int64_t b) { return (b + chunk - 1) / chunk * chunk; };
  std::int64_t distributed_rows = 0, distributed_chunks = 0;
  for (const std::int64_t b : step.batch_sizes) {
    distributed_rows += padded(b);
    distributed_chunks += (b + chunk - 1) / chunk;
  }
  const std::int64_t reference_rows = padded(total), reference_chunks = (total + chunk - 1) / chunk;
  const std::int64_t micro_batches = std::max<std::int64_t>(step.micro_batches, 1);
  const auto n = static_cast<std::int64_t>(step.batch_sizes.size()) / micro_batches;
  // Gradient accumulation: the sum over micro-batches (with, under keras, a
  // regularization term in each) and the division by K add a few roundings.
  const std::int64_t accumulated = micro_batches > 1 ? 2 * micro_batches + (step.divided_by_micro_batches ? 3 : 0) : 0;

  std::size_t offset = 0;
  std::vector<float> magnitudes, extra;
  for (std::size_t p = 0; p < grads_.size(); ++p) {
    const Tensor<float>& g = grads_[p];
    const auto size = static_cast<std::size_t>(g.size());
    const std::int64_t terms = model_.GradientTermsPerExample(p);
    const double additions = static_cast<double>(distributed_rows * terms + distributed_chunks + n + 4 +
                                                 reference_rows * terms + reference_chunks + 4 + accumulated);
    magnitudes.assign(magnitudes_[p].data(), magnitudes_[p].data() + size);
    // A half policy rounds each replica's data gradient and the reference's once to
    // the half type: at most half an ulp of it each (u_half relative to |g_r| <=
    // sum|x_i|, its whole sum bounded by the magnitude), and below float16's normal
    // range half its smallest subnormal, 2^-25, before unscaling.
    extra.clear();
    if (half != ComputeType::kFloat32) {
      const double u_half = half == ComputeType::kFloat16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
      const double floor =
          half == ComputeType::kFloat16 ? std::ldexp(1.0, -25) * static_cast<double>(n + 1) / scale : 0.0;
      extra.resize(size);
      for (std::size_t i = 0; i < size; ++i) extra[i] = static_cast<float>(2.0 * u_half * magnitudes[i] + floor);
    }
    if (const double l2 = model_.parameters()[p].spec.l2; l2 != 0.0)  // the regularization term 2*l2*|w|
      for (std::size_t i = 0; i < size; ++i)
        magnitudes[i] += static_cast<float>(2.0 * l2) * std::abs(weights[p][static_cast<std::int64_t>(i)]);
    check.variables.push_back(CompareWithBound(model_.parameters()[p].name, step.reduced_gradient.subspan(offset, size),
                                               std::span(g.data(), size), magnitudes, additions, extra));
    offset += size;
  }
  double loss_magnitude = std::abs(model_.RegularizationLoss(weights));
  for (std::size_t i = 0; i < step.labels.size(); ++i)
    loss_magnitude += std::abs(static_cast<double>(losses_[i]) * coefficients_[i]);
  const float magnitude = static_cast<float>(loss_magnitude);
  check.loss = CompareWithBound("loss", std::span(&step.reduced_loss, 1), std::span(&reference_loss, 1),
                                std::span(&magnitude, 1), static_cast<double>(2 * (total + n + 8) + accumulated * n));
  check.Summarize();
  // Name the classic causes when the gradients are off by the replica count.
  if (!check.within_bound) {
    double worst_scale = 1;
    for (const auto& v : check.variables)
      if (!v.within_bound && std::abs(v.scale - 1) > std::abs(worst_scale - 1)) worst_scale = v.scale;
    const bool n_times = std::abs(worst_scale - static_cast<double>(n)) < 0.05 * static_cast<double>(n);
    check.explanation += !step.mismatch_cause.empty()
                             ? step.mismatch_cause
                             : loss.FastMismatchCause(static_cast<std::int32_t>(n), n_times, model_.regularized());
    // The replicas' gradients were finite (a step they skip is not checked), so the
    // half type's range, not a loss code, is the cause.
    if (reference_overflowed) check.explanation = ReferenceOverflowCause(half, scale, n);
  }
  return check;
}

StepCheck ReferenceStep::CheckExact(const LossCode& loss, MathMode math, const Distributed& step) {
  // One device on the whole global batch, exact mode, the same loss code with N = 1.
  Prepare(loss, step);
  if (grads_.empty()) grads_ = model_.ZeroParameters();
  const float reference_loss = runner_.ExactGradient(*step.weights, *step.images, step.labels, coefficients_, losses_,
                                                     predictions_, words_, grads_);
  std::vector<float> reference;
  for (const auto& g : grads_) reference.insert(reference.end(), g.data(), g.data() + g.size());

  StepCheck check;
  check.step = step.step;
  check.exact = true;
  check.per_example_values_identical =
      std::memcmp(losses_.data(), step.per_example_loss.data(), sizeof(float) * step.per_example_loss.size()) == 0;
  std::size_t offset = 0;
  for (std::size_t p = 0; p < model_.parameters().size(); ++p) {
    const auto size = static_cast<std::size_t>(NumElements(model_.parameters()[p].spec.shape));
    check.variables.push_back(CompareBitwise(model_.parameters()[p].name, step.reduced_gradient.subspan(offset, size),
                                             std::span(reference).subspan(offset, size)));
    offset += size;
  }
  check.loss = CompareBitwise("loss", std::span(&step.reduced_loss, 1), std::span(&reference_loss, 1));
  check.Summarize();
  const auto n = static_cast<std::int32_t>(step.batch_sizes.size() /
                                           static_cast<std::size_t>(std::max<std::int64_t>(step.micro_batches, 1)));
  if (!check.within_bound)
    check.explanation += !step.mismatch_cause.empty()
                             ? step.mismatch_cause
                             : loss.ExactMismatchCause(n, loss.split(math), model_.regularized());
  return check;
}

}  // namespace dtlab
