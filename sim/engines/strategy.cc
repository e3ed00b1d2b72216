#include "sim/engines/strategy.h"

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
}  // namespace

StatusOr<StrategyKind> ParseStrategy(std::string_view name) { return ParseEnumName(name, kStrategies, "strategy"); }
std::string_view StrategyName(StrategyKind kind) { return EnumName(kind, kStrategies); }

}  // namespace dtlab
