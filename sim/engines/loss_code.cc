#include "sim/engines/loss_code.h"

#include <limits>

#include "core/enum_names.h"

namespace dtlab {
namespace {

// The names of the loss code's choices: `dtlab train` flags and scenario [loss] keys
// take them (the Keras reduction and version names are core/loss.h's).
constexpr NameTable<Convention, 2> kConventions = {{
    {"tf", Convention::kTf},
    {"ddp", Convention::kDdp},
}};
constexpr NameTable<LossDenominator, 3> kDenominators = {{
    {"default", LossDenominator::kDefault},
    {"global", LossDenominator::kGlobal},
    {"per-replica", LossDenominator::kPerReplica},
}};
constexpr NameTable<RegularizationSplit, 2> kSplits = {{
    {"tf", RegularizationSplit::kTf},
    {"exact", RegularizationSplit::kExact},
}};
constexpr NameTable<RegularizationScaling, 2> kScalings = {{
    {"scaled", RegularizationScaling::kScaled},
    {"unscaled", RegularizationScaling::kUnscaled},
}};
constexpr NameTable<EmptyReplicaLoss, 2> kEmptyReplicaLosses = {{
    {"zero", EmptyReplicaLoss::kZero},
    {"error", EmptyReplicaLoss::kError},
}};

// The pitfalls, in the words the reference check's verdicts use.
std::string UnscaledRegularizationCause(std::int32_t n) {
  return ": every replica added the whole regularization loss instead of scale_regularization_loss (1/" +
         std::to_string(n) + " of it), so the SUM over " + std::to_string(n) + " replicas holds " + std::to_string(n) +
         " times the weight decay";
}
constexpr const char* kKeras3MeanCause =
    ": Keras 3's sum_over_batch_size divides each replica's losses by its local batch and by "
    "num_replicas_in_sync, like compute_average_loss without global_batch_size, so examples on short replicas "
    "weigh more than the global batch gives them; use reduction none and compute_average_loss(per_example_loss, "
    "global_batch_size=GLOBAL_BATCH_SIZE)";
constexpr const char* kDefaultDenominatorCause =
    ": the default denominator (local batch x replicas) weighs examples on short replicas more than the global "
    "batch does; pass global_batch_size";

}  // namespace

StatusOr<Convention> ParseConvention(std::string_view name) { return ParseEnumName(name, kConventions, "convention"); }
std::string_view ConventionName(Convention convention) { return EnumName(convention, kConventions); }
StatusOr<LossDenominator> ParseLossDenominator(std::string_view name) {
  return ParseEnumName(name, kDenominators, "loss denominator");
}
std::string_view LossDenominatorName(LossDenominator denominator) { return EnumName(denominator, kDenominators); }
StatusOr<RegularizationSplit> ParseRegularizationSplit(std::string_view name) {
  return ParseEnumName(name, kSplits, "regularization split");
}
std::string_view RegularizationSplitName(RegularizationSplit split) { return EnumName(split, kSplits); }
StatusOr<RegularizationScaling> ParseRegularizationScaling(std::string_view name) {
  return ParseEnumName(name, kScalings, "regularization scaling");
}
std::string_view RegularizationScalingName(RegularizationScaling scaling) { return EnumName(scaling, kScalings); }
StatusOr<EmptyReplicaLoss> ParseEmptyReplicaLoss(std::string_view name) {
  return ParseEnumName(name, kEmptyReplicaLosses, "empty-replica loss");
}
std::string_view EmptyReplicaLossName(EmptyReplicaLoss behaviour) { return EnumName(behaviour, kEmptyReplicaLosses); }

std::int64_t ReplicaDenominator(LossDenominator rule, std::int64_t local_batch, std::int64_t global_batch_size,
                                std::int32_t num_replicas) {
  switch (rule) {
    case LossDenominator::kDefault:
      return AverageLossDenominator(local_batch, std::nullopt, num_replicas);
    case LossDenominator::kGlobal:
      return AverageLossDenominator(local_batch, global_batch_size, num_replicas);
    case LossDenominator::kPerReplica:
      return local_batch;  // tf.reduce_mean
  }
  return global_batch_size;
}

Status LossCode::Validate() const { return CheckReductionForCustomLoop(reduction, keras); }

LossCode::LossScale LossCode::ReplicaLossScale(std::int64_t local_batch, std::int64_t global_batch_size,
                                               std::int32_t num_replicas) const {
  if (ddp()) return {local_batch, 1.0f};
  if (keras3_mean())
    // keras/src/losses/loss.py reduce_values: divide_no_nan(sum, local batch), then
    // scale_loss_for_distribution multiplies by float32(1.0 / num_replicas_in_sync).
    return {local_batch, num_replicas > 1 ? static_cast<float>(1.0 / num_replicas) : 1.0f};
  return {ReplicaDenominator(denominator, local_batch, global_batch_size, num_replicas), 1.0f};
}

LossCode::LossScale LossCode::ReplicaCoefficients(std::int64_t local_batch, std::int64_t global_batch_size,
                                                  std::int32_t num_replicas, std::span<float> coefficients) const {
  const LossScale scale = ReplicaLossScale(local_batch, global_batch_size, num_replicas);
  AverageLossCoefficients<float>({}, local_batch, scale.denominator, scale.factor, coefficients);
  return scale;
}

float LossCode::ReplicaDataLoss(std::span<const float> per_example_loss, const LossScale& scale) const {
  if (per_example_loss.empty() && empty_replica_nan()) return std::numeric_limits<float>::quiet_NaN();
  return ComputeAverageLoss<float>(per_example_loss, {}, scale.denominator) * scale.factor;
}

Status LossCode::CheckEmptyReplicas(std::span<const std::int64_t> batch_sizes, std::int64_t step) const {
  if (empty_replica != EmptyReplicaLoss::kError || convention != Convention::kTf ||
      denominator != LossDenominator::kDefault || keras3_mean())
    return Status::Ok();
  for (std::size_t r = 0; r < batch_sizes.size(); ++r)
    if (batch_sizes[r] == 0)
      return Status::Runtime(
          "step " + std::to_string(step) + ": replica " + std::to_string(r) +
          " has no examples, and TF 2.12's compute_average_loss(per_example_loss) asserts that local batch x "
          "replicas is positive: InvalidArgumentError: global_batch_size must be positive. (Condition x > 0 did not "
          "hold element-wise: x = 0) Pass global_batch_size, or use TF 2.13 and later "
          "(--empty-replica-loss zero), where the empty replica's loss is 0; the step was not applied");
  return Status::Ok();
}

std::string LossCode::EmptyReplicaNanCause(std::size_t replica) {
  return ": replica " + std::to_string(replica) +
         " had no examples, and tf.reduce_mean of no values is 0 / 0 (in every TF version); divide by the global "
         "batch instead: compute_average_loss(per_example_loss, global_batch_size=...) (--loss-denominator global)";
}

std::string LossCode::ShortName() const {
  if (ddp()) return "ddp mean";
  std::string code = std::string(LossDenominatorName(denominator));
  if (regularization_scaling == RegularizationScaling::kUnscaled) code += ", unscaled reg.";
  if (empty_replica == EmptyReplicaLoss::kError) code += ", TF 2.12";
  if (reduction != LossReduction::kNone) code += ", " + std::string(LossReductionName(reduction));
  if (keras == KerasVersion::k2) code += ", Keras 2";
  return code;
}

std::string LossCode::LossCodeText(std::int64_t global_batch_size) const {
  std::string data;
  if (ddp())
    data = "mean(per_example_loss) (PyTorch DDP: gradients MEAN all-reduced)";
  else if (keras3_mean())
    data =
        "SparseCategoricalCrossentropy(from_logits=True, reduction='sum_over_batch_size')(labels, logits) "
        "(Keras 3: the local mean x 1/num_replicas_in_sync)";
  else if (denominator == LossDenominator::kGlobal)
    data = "compute_average_loss(per_example_loss, global_batch_size=" + std::to_string(global_batch_size) + ")";
  else if (denominator == LossDenominator::kDefault)
    data = "compute_average_loss(per_example_loss)";
  else
    data = "tf.reduce_mean(per_example_loss)";
  const bool unscaled = ddp() || regularization_scaling == RegularizationScaling::kUnscaled;
  return data + (unscaled ? " + l2 * sum(kernel^2)" : " + scale_regularization_loss(l2 * sum(kernel^2))");
}

std::string LossCode::FastMismatchCause(std::int32_t n, bool n_times, bool regularized) const {
  if (n <= 1) return "";
  if (!ddp() && regularization_scaling == RegularizationScaling::kUnscaled && regularized)
    return UnscaledRegularizationCause(n);
  if (n_times && denominator == LossDenominator::kPerReplica && !ddp())
    return ": each replica divided its loss by its local batch (tf.reduce_mean) instead of the global batch, so the "
           "SUM over " +
           std::to_string(n) + " replicas makes the gradients " + std::to_string(n) +
           " times too large; use compute_average_loss(per_example_loss, global_batch_size=GLOBAL_BATCH_SIZE)";
  if (keras3_mean()) return kKeras3MeanCause;
  if (denominator == LossDenominator::kDefault && !ddp()) return kDefaultDenominatorCause;
  if (ddp())
    return ": DDP averages per-replica means, which weighs examples on short replicas more than the global-batch "
           "mean does";
  return "";
}

std::string LossCode::ExactMismatchCause(std::int32_t n, RegularizationSplit split, bool regularized) const {
  if (n <= 1) return "";
  const bool power_of_two = (n & (n - 1)) == 0;
  if (ddp() && !power_of_two)
    return ": DDP divides each replica's loss by its local batch and the sum by " + std::to_string(n) +
           ", which is not a power of two, so the scaling itself rounds";
  if (!ddp() && regularization_scaling == RegularizationScaling::kUnscaled && regularized)
    return UnscaledRegularizationCause(n);
  if (!ddp() && split == RegularizationSplit::kTf && !power_of_two && regularized)
    return ": scale_regularization_loss gives every replica 1/" + std::to_string(n) +
           " of the regularization, which rounds because " + std::to_string(n) +
           " is not a power of two; --regularization-split exact keeps the total exact";
  if (denominator == LossDenominator::kPerReplica && !ddp())
    return ": each replica divided its loss by its local batch (tf.reduce_mean) instead of the global batch; use "
           "compute_average_loss(per_example_loss, global_batch_size=GLOBAL_BATCH_SIZE)";
  if (keras3_mean()) return kKeras3MeanCause;
  if (denominator == LossDenominator::kDefault && !ddp()) return kDefaultDenominatorCause;
  return "";
}

const std::vector<NamedLossCode>& NamedLossCodes() {
  static const std::vector<NamedLossCode> codes = [] {
    // compute_average_loss(per_example_loss, sample_weight, global_batch_size) with
    // per-pixel losses averaged over H*W, and the regularization counted once (the
    // exact split: the whole of it on replica 0).
    LossCode correct;
    correct.regularization_split = RegularizationSplit::kExact;
    LossCode per_replica_mean = correct;
    per_replica_mean.denominator = LossDenominator::kPerReplica;  // tf.reduce_mean on each replica
    LossCode default_denominator = correct;
    default_denominator.denominator = LossDenominator::kDefault;  // compute_average_loss without global_batch_size
    LossCode unscaled = correct;
    unscaled.regularization_scaling = RegularizationScaling::kUnscaled;  // no scale_regularization_loss
    return std::vector<NamedLossCode>{
        {"correct", correct, true, true},
        {"per-replica-mean", per_replica_mean, true, false},
        {"default-denominator", default_denominator, true, false},
        {"unscaled-regularization", unscaled, true, false},
        {"per-pixel-without-hw", correct, false, true},  // per-pixel losses divided by the global batch only
    };
  }();
  return codes;
}

StatusOr<NamedLossCode> FindNamedLossCode(std::string_view name) {
  std::string names;
  for (const NamedLossCode& code : NamedLossCodes()) {
    if (code.name == name) return code;
    names += (names.empty() ? "" : ", ") + std::string(code.name);
  }
  return Status::InvalidArgument("unknown loss code '" + std::string(name) + "'; allowed values: " + names);
}

}  // namespace dtlab
