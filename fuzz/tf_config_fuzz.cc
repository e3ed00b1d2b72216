// Fuzzes the TF_CONFIG reader (sim/comm/tf_config.h): any bytes give a TfConfig or an
// InvalidArgument with a message, never a crash. An accepted config must hold the
// invariants the rest of dtlab relies on: at least one training task, a rank in
// range for a chief or worker task, a world check that passes for its own world
// and fails for a larger one, and a description that can be written.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sim/comm/tf_config.h"

namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "tf_config_fuzz: invariant broken: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto config = dtlab::ParseTfConfig(text);
  if (!config.ok()) {
    Require(config.status().code() == dtlab::Status::Code::kInvalidArgument, "errors are InvalidArgument");
    Require(!config.status().message().empty(), "an error has a message");
    return 0;
  }
  const int workers = config->NumWorkers();
  const int rank = config->WorkerRank();
  Require(workers >= 1, "an accepted cluster has a training task");
  Require(rank >= -1 && rank < workers, "the rank is -1 or a training task's");
  Require((rank >= 0) == (config->task_type == "chief" || config->task_type == "worker"), "chief and workers rank");
  Require(!config->IsChief() || rank == 0, "the chief is rank 0");
  const std::string description = dtlab::DescribeTfConfig(*config);
  Require(description.find("<- this task") != std::string::npos, "the description marks this task");
  int marked = 0;
  for (const dtlab::TfTask& task : config->Tasks()) marked += task.is_this_task ? 1 : 0;
  Require(marked == 1, "exactly one task is this task");
  if (rank >= 0) {
    Require(dtlab::CheckTfConfigAgainstWorld(*config, workers, rank).ok(), "the config fits its own world");
    Require(!dtlab::CheckTfConfigAgainstWorld(*config, workers + 1, rank).ok(), "a larger world does not fit");
  } else {
    Require(!dtlab::CheckTfConfigAgainstWorld(*config, workers, 0).ok(), "ps and evaluator tasks are not ranks");
  }
  // A world drawn from the input: any answer, no crash.
  (void)dtlab::CheckTfConfigAgainstWorld(*config, static_cast<int>(size % 7) - 1,
                                         data[0] % 9 - 2);  // size > 0: "" is refused
  return 0;
}
