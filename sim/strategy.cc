#include "sim/strategy.h"

#include "core/enum_names.h"

namespace dtlab {
namespace {

constexpr NameTable<StrategyKind, 6> kStrategies = {{
    {"one_device", StrategyKind::kOneDevice},
    {"mirrored", StrategyKind::kMirrored},
    {"central_storage", StrategyKind::kCentralStorage},
    {"multi_worker_mirrored", StrategyKind::kMultiWorkerMirrored},
    {"tpu", StrategyKind::kTpu},
    {"parameter_server", StrategyKind::kParameterServer},
}};
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
}  // namespace

StatusOr<RegularizationScaling> ParseRegularizationScaling(std::string_view name) {
  return ParseEnumName(name, kScalings, "regularization scaling");
}
std::string_view RegularizationScalingName(RegularizationScaling scaling) { return EnumName(scaling, kScalings); }
StatusOr<EmptyReplicaLoss> ParseEmptyReplicaLoss(std::string_view name) {
  return ParseEnumName(name, kEmptyReplicaLosses, "empty-replica loss");
}
std::string_view EmptyReplicaLossName(EmptyReplicaLoss behaviour) { return EnumName(behaviour, kEmptyReplicaLosses); }
StatusOr<RegularizationSplit> ParseRegularizationSplit(std::string_view name) {
  return ParseEnumName(name, kSplits, "regularization split");
}
std::string_view RegularizationSplitName(RegularizationSplit split) { return EnumName(split, kSplits); }
StatusOr<StrategyKind> ParseStrategy(std::string_view name) { return ParseEnumName(name, kStrategies, "strategy"); }
std::string_view StrategyName(StrategyKind kind) { return EnumName(kind, kStrategies); }
StatusOr<Convention> ParseConvention(std::string_view name) { return ParseEnumName(name, kConventions, "convention"); }
std::string_view ConventionName(Convention convention) { return EnumName(convention, kConventions); }
StatusOr<LossDenominator> ParseLossDenominator(std::string_view name) {
  return ParseEnumName(name, kDenominators, "loss denominator");
}
std::string_view LossDenominatorName(LossDenominator denominator) { return EnumName(denominator, kDenominators); }

std::int64_t ReplicaDenominator(LossDenominator rule, std::int64_t local_batch, std::int64_t global_batch_size,
                                std::int32_t num_replicas) {
  switch (rule) {
    case LossDenominator::kDefault: return local_batch * num_replicas;
    case LossDenominator::kGlobal: return global_batch_size;
    case LossDenominator::kPerReplica: return local_batch;
  }
  return global_batch_size;
}

}  // namespace dtlab
