#include "sim/check/loss_check.h"

#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <numeric>

#include "core/batch.h"
#include "core/dense.h"
#include "core/exact_sum.h"
#include "core/metrics.h"
#include "core/mnist.h"
#include "core/reshape.h"
#include "core/safetensors.h"
#include "core/training_state.h"
#include "sim/compute/batch_runner.h"
#include "sim/engines/cluster.h"
#include "sim/comm/collectives.h"
#include "sim/engines/reference_check.h"

namespace dtlab {
namespace {

// The model the gradients are computed with: softmax regression on 3x3 images with
// an L2 regularizer big enough to matter (30 parameters, so that thousands of
// trials take seconds).
const Sequential<float>& CheckModel() {
  static const auto* model = [] {
    std::vector<std::unique_ptr<Layer<float>>> layers;
    layers.push_back(std::make_unique<Reshape<float>>("flatten", Shape{}));
    layers.push_back(std::make_unique<Dense<float>>("dense", 3, Activation::kLinear, L2Factors{0.01, 0}));
    return new Sequential<float>("check-softmax", {3, 3, 1}, std::move(layers));
  }();
  return *model;
}

std::string Join(const std::vector<std::int64_t>& values) {
  std::string text;
  for (const auto v : values) text += (text.empty() ? "" : ", ") + std::to_string(v);
  return "[" + text + "]";
}

std::string Number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", x);
  return text;
}

std::string Replicas(std::int32_t n) { return std::to_string(n) + (n == 1 ? " replica" : " replicas"); }

// "2 replicas (1 worker), global batch 3 split [2, 1] (v2 rebatch)..."
std::string DescribeCase(const CheckCase& c) {
  std::string text = Replicas(c.replicas) + " (" + std::to_string(c.workers) +
                     (c.workers == 1 ? " worker)" : " workers)") + ", global batch " + std::to_string(c.global_batch);
  if (c.batch < c.global_batch) text += ", a short final batch of " + std::to_string(c.batch);
  text += " split " + Join(c.split) + " (" + std::string(RebatchRuleName(c.rule)) + " rebatch)";
  if (!c.weights.empty()) {
    text += ", sample weights [";
    for (std::size_t i = 0; i < c.weights.size(); ++i) text += (i ? ", " : "") + Number(c.weights[i]);
    text += "]";
  }
  if (c.values_per_example > 1)
    text += ", " + std::to_string(c.values_per_example) + " losses per example (per-pixel labels)";
  return text;
}

struct Gradients {
  std::vector<float> distributed, reference;
};

// The real thing in exact mode: each replica's examples weighted by its
// coefficients, its regularization share, the words all-reduced, rounded; and one
// device with the global-batch weights.
Gradients ComputeGradients(const CheckCase& c, const std::vector<double>& coefficients,
                           const std::vector<double>& regularization, const std::vector<double>& reference) {
  const Sequential<float>& model = CheckModel();
  const ParameterList<float> params = model.InitialParameters(7);
  const ImageDataset data = MakeSyntheticDataset(std::max<std::int64_t>(c.batch, 1), 3, 3, 3, 11);
  std::vector<std::int64_t> indices(static_cast<std::size_t>(c.batch));
  std::iota(indices.begin(), indices.end(), 0);
  Tensor<float> images;
  std::vector<std::int32_t> labels;
  GatherBatch(data, indices, images, labels);
  std::vector<float> losses(labels.size()), weights(labels.size()), reference_weights(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    weights[i] = static_cast<float>(coefficients[i]);
    reference_weights[i] = static_cast<float>(reference[i]);
  }
  std::vector<std::int32_t> predictions(labels.size());
  const auto size = static_cast<std::size_t>(model.num_parameter_values() * kExactWords);
  std::vector<std::vector<std::int64_t>> words(static_cast<std::size_t>(c.replicas), std::vector<std::int64_t>(size));
  std::vector<ExactSegment> segments;
  std::int64_t begin = 0;
  for (std::size_t r = 0; r < c.split.size(); ++r) {
    segments.push_back({&params, begin, c.split[r], words[r], static_cast<float>(regularization[r])});
    begin += c.split[r];
  }
  BatchRunner runner(model, 16);
  runner.RunExact(images, labels, weights, losses, predictions, segments);
  std::vector<std::span<std::int64_t>> buffers(words.begin(), words.end());
  CollectiveOptions options;
  options.algorithm = AllReduceAlgorithm::kHierarchical;
  options.replicas_per_worker = c.replicas / c.workers;
  AllReduce<std::int64_t>(buffers, ReduceOp::kSum, options);
  Gradients g;
  g.distributed.resize(static_cast<std::size_t>(model.num_parameter_values()));
  ExactToFloats(words[0], g.distributed);
  ParameterList<float> grads = model.ZeroParameters();
  std::vector<std::int64_t> scratch;
  runner.ExactGradient(params, images, labels, reference_weights, losses, predictions, scratch, grads);
  for (const auto& p : grads) g.reference.insert(g.reference.end(), p.data(), p.data() + p.size());
  return g;
}

// Random cases; RapidCheck shrinks every choice toward the simplest.
rc::Gen<CheckCase> GenCase(const CheckOptions& options, bool per_pixel) {
  return rc::gen::exec([options, per_pixel] {
    CheckCase c;
    c.replicas = *rc::gen::inRange<std::int32_t>(1, options.max_replicas + 1);
    std::vector<std::int32_t> divisors;
    for (std::int32_t w = 1; w <= c.replicas; ++w)
      if (c.replicas % w == 0) divisors.push_back(w);
    c.workers = *rc::gen::elementOf(divisors);
    c.global_batch = *rc::gen::inRange<std::int64_t>(1, 3 * c.replicas + 6);
    c.batch = c.global_batch - *rc::gen::inRange<std::int64_t>(0, c.global_batch);
    c.rule = *rc::gen::element(RebatchRule::kV2, RebatchRule::kLegacy);
    if (options.sample_weights && *rc::gen::arbitrary<bool>())
      for (std::int64_t i = 0; i < c.batch; ++i) c.weights.push_back(*rc::gen::element(1.0, 0.5, 2.0, 0.0, 0.25));
    c.values_per_example = per_pixel ? *rc::gen::element<std::int64_t>(1, 4, 9) : 1;
    std::vector<std::int64_t> batch(static_cast<std::size_t>(c.batch));
    std::iota(batch.begin(), batch.end(), 0);
    for (const auto& replica : SplitBatch(batch, c.global_batch, c.replicas, c.rule))
      c.split.push_back(static_cast<std::int64_t>(replica.size()));
    return c;
  });
}

// Runs `body` as a RapidCheck property, quietly, and turns the result into a
// CheckResult. `body` calls RC_FAIL with the counterexample in words.
class QuietListener final : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};

CheckResult RunProperty(const std::function<void()>& body, const CheckOptions& options) {
  // RapidCheck announces its configuration on std::cerr the first time it loads it
  // (from RC_PARAMS); dtlab passes its own parameters, so keep that line out of the report.
  static const bool configured = [] {
    std::cerr.setstate(std::ios::failbit);
    rc::detail::configuration();
    std::cerr.clear();
    return true;
  }();
  (void)configured;
  CheckResult result;
  result.seed = options.seed;
  rc::detail::TestParams params;
  params.seed = options.seed;
  params.maxSuccess = options.trials;
  params.maxSize = 100;
  rc::detail::TestMetadata metadata;
  metadata.id = "dtlab check";
  QuietListener listener;
  const rc::detail::TestResult outcome =
      rc::detail::checkProperty(rc::detail::toProperty([&] { body(); }), metadata, params, listener);
  rc::detail::SuccessResult success;
  rc::detail::FailureResult failure;
  rc::detail::GaveUpResult gave_up;
  rc::detail::Error error;
  if (outcome.match(success)) {
    result.trials = success.numSuccess;
  } else if (outcome.match(failure)) {
    result.passed = false;
    result.trials = failure.numSuccess;
    // RC_FAIL puts the source location and the expression before the message,
    // separated from it by a blank line; keep the message.
    const auto marker = failure.description.rfind("\n\n");
    result.counterexample = marker == std::string::npos ? failure.description : failure.description.substr(marker + 2);
  } else if (outcome.match(gave_up)) {
    result.passed = false;
    result.error = gave_up.description;
  } else if (outcome.match(error)) {
    result.passed = false;
    result.error = error.description;
  }
  return result;
}

double ReplicaLossOfUnits(const LossScalingCode& code, const ReplicaInfo& info, std::span<const double> weights,
                          std::int64_t example) {
  std::vector<double> losses(static_cast<std::size_t>(info.local_batch * info.values_per_example), 0.0);
  if (example >= 0) std::fill_n(losses.begin() + example * info.values_per_example, info.values_per_example, 1.0);
  return code.loss(losses, weights, info);
}

}  // namespace

std::string EvaluateLossScalingCase(const LossScalingCode& code, const CheckCase& c, bool bitwise) {
  // The weight each example gets in the sum of the replicas' losses, read by
  // evaluating the (linear) loss code on unit losses.
  std::vector<double> coefficients, reference, regularization;
  std::vector<std::int32_t> replica_of;
  std::int64_t begin = 0;
  for (std::int32_t r = 0; r < c.replicas; ++r) {
    const std::int64_t count = c.split[static_cast<std::size_t>(r)];
    const ReplicaInfo info{r, c.replicas, c.global_batch, count, c.values_per_example};
    std::span<const double> weights;
    if (!c.weights.empty())
      weights = std::span(c.weights).subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(count));
    const double zero = ReplicaLossOfUnits(code, info, weights, -1);
    if (zero != 0.0)
      return "the loss code is not linear in the losses: all-zero losses give " + Number(zero) + " on replica " +
             std::to_string(r);
    for (std::int64_t k = 0; k < count; ++k) {
      coefficients.push_back(ReplicaLossOfUnits(code, info, weights, k));
      replica_of.push_back(r);
      const double w = c.weights.empty() ? 1.0 : c.weights[static_cast<std::size_t>(begin + k)];
      reference.push_back(w / static_cast<double>(c.global_batch));
    }
    regularization.push_back(code.regularization ? code.regularization(1.0, info) : 0.0);
    begin += count;
  }
  const double total_regularization = std::accumulate(regularization.begin(), regularization.end(), 0.0);
  const double wanted_regularization = code.regularization ? 1.0 : 0.0;

  // The worst example: the largest relative difference from its global-batch weight.
  std::string problem;
  double worst = 0;
  for (std::size_t i = 0; i < coefficients.size(); ++i) {
    const double diff = std::abs(coefficients[i] - reference[i]);
    const double relative = reference[i] != 0 ? diff / reference[i] : (diff != 0 ? INFINITY : 0.0);
    if (relative > 1e-9 && relative > worst) {
      worst = relative;
      const std::string where =
          "example " + std::to_string(i + 1) + " (on replica " + std::to_string(replica_of[i]) + ")";
      if (reference[i] == 0)
        problem = where + " has sample weight 0 but weighs " + Number(coefficients[i]);
      else
        problem = where + " weighs " + Number(coefficients[i] / reference[i]) +
                  "x what the global-batch loss gives it (" + Number(coefficients[i]) + " instead of " +
                  Number(reference[i]) + ")";
    }
  }
  if (!problem.empty()) {
    bool uniform = true;
    for (std::size_t i = 0; i < coefficients.size(); ++i)
      uniform &= reference[i] != 0 && std::abs(coefficients[i] / reference[i] - coefficients[0] / reference[0]) < 1e-9;
    if (uniform && coefficients.size() > 1)
      problem = "every example weighs " + Number(coefficients[0] / reference[0]) +
                "x what the global-batch loss gives it (" + Number(coefficients[0]) + " instead of " +
                Number(reference[0]) + " for example 1)";
  }
  if (std::abs(total_regularization - wanted_regularization) > 1e-9)
    problem += std::string(problem.empty() ? "" : "; ") + "the regularization is counted " +
               Number(total_regularization) + " times instead of once (replicas' shares " +
               [&] {
                 std::string s;
                 for (std::size_t r = 0; r < regularization.size(); ++r)
                   s += (r ? ", " : "") + Number(regularization[r]);
                 return s;
               }() +
               ")";
  if (problem.empty() && !bitwise) return "";

  const Gradients g = ComputeGradients(c, coefficients, regularization, reference);
  const VariableCheck check = CompareBitwise("gradient", g.distributed, g.reference);
  if (problem.empty()) {
    if (check.within_bound) return "";
    problem = "every weight is right but the distributed gradient is not bitwise equal to one device's: " +
              std::to_string(check.values_differing) + " values differ by up to " + std::to_string(check.max_ulp) +
              " ULP (a regularization share that rounds, such as 1/" + std::to_string(c.replicas) + "? docs/exact.md)";
    return DescribeCase(c) + ": " + problem;
  }
  return DescribeCase(c) + ": " + problem +
         "; the distributed gradient differs from the global-batch gradient by up to " + Number(check.max_abs_diff) +
         " (" + std::to_string(check.values_differing) + " of " + std::to_string(g.reference.size()) +
         " values differ)";
}

CheckResult CheckLossScaling(const LossScalingCode& code, const CheckOptions& options) {
  return RunProperty(
      [&] {
        const CheckCase c = *GenCase(options, code.per_pixel);
        const std::string failure = EvaluateLossScalingCase(code, c, options.bitwise);
        if (!failure.empty()) RC_FAIL(failure);
      },
      options);
}

LossScalingCode ScalingCodeOf(const NamedLossCode& named) {
  LossScalingCode code;
  // The sum of w * loss over every value, divided by the code's denominator (and by
  // H*W for per-pixel losses when the code averages them over pixels), times its
  // factor. An empty replica contributes 0 here whatever the code (div_no_nan): the
  // property weighs examples, and a NaN would only hide which example is wrong.
  code.loss = [loss = named.code, pixels = named.divides_by_pixels](
                  std::span<const double> losses, std::span<const double> weights, const ReplicaInfo& r) {
    double sum = 0;
    for (std::size_t i = 0; i < losses.size(); ++i)
      sum += losses[i] * (weights.empty() ? 1.0 : weights[i / static_cast<std::size_t>(r.values_per_example)]);
    const LossCode::LossScale scale = loss.ReplicaLossScale(r.local_batch, r.global_batch_size, r.num_replicas_in_sync);
    const std::int64_t d = scale.denominator * (pixels ? r.values_per_example : 1);
    return d == 0 ? 0.0 : sum / static_cast<double>(d) * scale.factor;
  };
  code.regularization = [loss = named.code](double reg, const ReplicaInfo& r) {
    return loss.RegularizationShare(reg, r.replica_id, r.num_replicas_in_sync, loss.split(MathMode::kExact));
  };
  code.per_pixel = named.per_pixel_cases;
  return code;
}

StatusOr<LossScalingCode> BuiltinScalingCode(std::string_view name) {
  DTLAB_ASSIGN_OR_RETURN(const NamedLossCode named, FindNamedLossCode(name));
  return ScalingCodeOf(named);
}

namespace {
LossScalingCode Named(std::string_view name) { return ScalingCodeOf(*FindNamedLossCode(name)); }
}  // namespace

LossScalingCode TfCorrectScaling() { return Named("correct"); }
LossScalingCode PerReplicaMeanScaling() { return Named("per-replica-mean"); }
LossScalingCode DefaultDenominatorScaling() { return Named("default-denominator"); }
LossScalingCode UnscaledRegularization() { return Named("unscaled-regularization"); }
LossScalingCode PerPixelWithoutHw() { return Named("per-pixel-without-hw"); }

namespace {

// Merged ExactMeanMetric states equal one device's, bit for bit, for any split.
CheckResult MetricMerge(const CheckOptions& options) {
  return RunProperty(
      [&] {
        const auto n = *rc::gen::inRange<std::int32_t>(1, options.max_replicas + 1);
        ExactMeanMetric merged, one;
        std::vector<float> all;
        for (std::int32_t r = 0; r < n; ++r) {
          const auto values = *rc::gen::container<std::vector<float>>(rc::gen::map(
              rc::gen::inRange(-4000, 4000), [](int v) { return std::ldexp(static_cast<float>(v), -7) * 1.1f; }));
          ExactMeanMetric replica;
          replica.UpdateState(values);
          merged.Merge(replica);
          all.insert(all.end(), values.begin(), values.end());
        }
        one.UpdateState(all);
        if (!(merged.total() == one.total() && merged.count() == one.count()))
          RC_FAIL(Replicas(n) + ": the merged metric state differs from one device's");
      },
      options);
}

// The Mean-metric trap: a Mean metric fed the replicas' scaled losses reads their
// average, but the global loss is their SUM (docs/semantics.md).
CheckResult MeanMetricTrap(const CheckOptions& options) {
  return RunProperty(
      [&] {
        const auto n = *rc::gen::inRange<std::int32_t>(1, options.max_replicas + 1);
        std::vector<float> losses;
        for (std::int32_t r = 0; r < n; ++r) losses.push_back(static_cast<float>(*rc::gen::inRange(1, 40)) / 4.0f);
        MeanMetric mean;
        mean.UpdateState(losses);
        float sum = 0;
        for (const float l : losses) sum += l;
        if (mean.Result() != sum) {
          std::string values;
          for (const float l : losses) values += (values.empty() ? "" : ", ") + Number(l);
          RC_FAIL(Replicas(n) + " with scaled losses " + values + ": a Mean metric fed them reads " +
                  Number(mean.Result()) + ", but the global loss is their SUM, " + Number(sum) +
                  " (strategy.reduce(SUM, ...), or sum the metric states)");
        }
      },
      options);
}

// A checkpoint saved on N1 replicas (serialized and parsed back) and restored on
// N2 continues exactly as one device does (exact mode).
CheckResult CheckpointRestore(const CheckOptions& options) {
  return RunProperty(
      [&] {
        const std::int32_t cap = std::min<std::int32_t>(options.max_replicas, 8);
        const auto n1 = *rc::gen::inRange<std::int32_t>(1, cap + 1);
        const auto n2 = *rc::gen::inRange<std::int32_t>(1, cap + 1);
        const auto g = *rc::gen::inRange<std::int64_t>(1, 20);
        const Sequential<float>& model = CheckModel();
        const ImageDataset data = MakeSyntheticDataset(2 * g, 3, 3, 3, 5);
        const ParameterList<float> initial = model.InitialParameters(3);
        auto make = [&](std::int32_t n, const ParameterList<float>& params) {
          ClusterConfig config;
          config.math = MathMode::kExact;
          config.replicas = n;
          config.strategy = n == 1 ? StrategyKind::kOneDevice : StrategyKind::kMirrored;
          return std::move(Cluster::Create(model, config, "adam", {}, params, 16)).value();
        };
        auto batch = [&](std::int64_t step, std::int32_t n) {
          std::vector<std::int64_t> b(static_cast<std::size_t>(g));
          std::iota(b.begin(), b.end(), step * g);
          return SplitBatch(b, g, n, RebatchRule::kV2);
        };
        auto first = make(n1, initial);
        auto one = make(1, initial);
        (void)first->TrainStep(data, batch(0, n1), g, 0.01f, 0);
        (void)one->TrainStep(data, batch(0, 1), g, 0.01f, 0);
        // Through the checkpoint file's bytes, as a restart would read them.
        TrainingState saved;
        saved.optimizer = std::move(MakeOptimizer("adam", {})).value();
        saved.params = first->variables();
        saved.optimizer->Build(saved.params);
        first->ExportState(saved);
        const std::string bytes = SerializeSafetensors(MakeCheckpoint(model, saved, {}));
        TrainingState state;
        state.optimizer = std::move(MakeOptimizer("adam", {})).value();
        state.params = model.ZeroParameters();
        state.optimizer->Build(state.params);
        const auto file = ParseSafetensors(bytes, "checkpoint");
        if (!file.ok() || !RestoreCheckpoint(*file, model, state).ok()) RC_FAIL("the checkpoint did not restore");
        auto second = make(n2, state.params);
        second->ImportState(state);
        (void)second->TrainStep(data, batch(1, n2), g, 0.01f, 1);
        (void)one->TrainStep(data, batch(1, 1), g, 0.01f, 1);
        for (std::size_t p = 0; p < second->variables().size(); ++p)
          if (!(second->variables()[p] == one->variables()[p]))
            RC_FAIL("saved on " + Replicas(n1) + " and restored on " + Replicas(n2) + ", global batch " +
                    std::to_string(g) + ": the next step's " + model.parameters()[p].name +
                    " differs from one device's");
      },
      options);
}

BuiltinProperty ScalingProperty(std::string name, std::string description, bool expect_pass,
                                LossScalingCode (*code)()) {
  return {std::move(name), std::move(description), expect_pass,
          [code](const CheckOptions& options) { return CheckLossScaling(code(), options); }};
}

}  // namespace

const std::vector<BuiltinProperty>& BuiltinProperties() {
  static const std::vector<BuiltinProperty> properties = {
      ScalingProperty("correct-scaling",
                      "compute_average_loss(..., global_batch_size) with the regularization counted once gives the "
                      "global-batch gradient, bit for bit (sample weights, per-pixel losses, any split)",
                      true, TfCorrectScaling),
      ScalingProperty("per-replica-mean",
                      "pitfall: tf.reduce_mean on each replica (gradients N times too large, short batches upweighted)",
                      false, PerReplicaMeanScaling),
      ScalingProperty("default-denominator",
                      "pitfall: compute_average_loss without global_batch_size (examples on short replicas upweighted)",
                      false, DefaultDenominatorScaling),
      ScalingProperty("unscaled-regularization",
                      "pitfall: every replica adds the whole regularization (N times the weight decay)", false,
                      UnscaledRegularization),
      ScalingProperty("per-pixel-without-hw", "pitfall: per-pixel losses divided by the global batch but not by H*W",
                      false, PerPixelWithoutHw),
      {"metric-merge", "replicas' Mean metric states, summed, equal one device's state bit for bit (exact mode)", true,
       MetricMerge},
      {"mean-metric-trap", "pitfall: a Mean metric over the replicas' scaled losses instead of their SUM", false,
       MeanMetricTrap},
      {"checkpoint-restore",
       "a checkpoint saved on N1 replicas and restored on N2 continues exactly as one device (exact mode)", true,
       CheckpointRestore},
  };
  return properties;
}

}  // namespace dtlab
