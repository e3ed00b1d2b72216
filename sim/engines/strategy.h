// The vocabulary of a distributed run: strategies, with their names on the command
// line. The loss code's choices (conventions, denominators, ...) are sim/engines/loss_code.h's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "sim/engines/loss_code.h"

namespace dtlab {

/// tf.distribute strategies.
enum class StrategyKind {
  kOneDevice,            // OneDeviceStrategy: one replica
  kMirrored,             // MirroredStrategy: N replicas, mirrored variables, all-reduce
  kCentralStorage,       // CentralStorageStrategy: one host copy; reduce to it, broadcast back
  kMultiWorkerMirrored,  // MultiWorkerMirroredStrategy: W workers x R replicas, input sharded
  kTpu,                  // TPUStrategy: synchronous replicas on a 2-D torus
  kParameterServer,      // ParameterServerStrategy: asynchronous workers, sharded variables
};
StatusOr<StrategyKind> ParseStrategy(std::string_view name);
std::string_view StrategyName(StrategyKind kind);

}  // namespace dtlab
