// Fuzzes the command line (cli/options.cc, sim/comm/faults.h): the input is split into
// arguments at newlines; its first byte picks the command, whose real option table
// parses them (ParseOnlyScope: parse, never run). Any argv gives exit 0 or 2, never
// a crash, an abort or an uncaught exception. Every --inject-fault value, and the
// whole input as one spec, goes through ParseFaultSpec: an accepted spec must have
// its fields in range, write back to text that parses to the same fault, and be
// refused by ClusterConfig::Validate exactly when it names a replica the cluster
// lacks.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "cli/command.h"
#include "sim/engines/cluster.h"
#include "sim/comm/faults.h"

namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "options_fuzz: invariant broken: %s\n", what);
  std::abort();
}

using Command = int (*)(const std::vector<std::string>&);
constexpr Command kCommands[] = {dtlab::cli::TrainCommand,   dtlab::cli::EvalCommand,   dtlab::cli::CheckCommand,
                                 dtlab::cli::RunCommand,     dtlab::cli::ListCommand,   dtlab::cli::LessonCommand,
                                 dtlab::cli::ClusterCommand, dtlab::cli::ReplayCommand, dtlab::cli::DevicesCommand};

void CheckFault(std::string_view text, std::int32_t replicas) {
  const auto fault = dtlab::ParseFaultSpec(text);
  if (!fault.ok()) {
    Require(fault.status().code() == dtlab::Status::Code::kInvalidArgument, "fault errors are InvalidArgument");
    Require(fault.status().message().find("fault '") == 0, "a fault error names the spec");
    return;
  }
  Require(fault->replica >= 0, "replica >= 0");
  Require(fault->to >= -1, "to >= -1");
  Require(fault->step >= 1, "step >= 1");
  Require(fault->phase >= 0, "phase >= 0");
  if (fault->kind == dtlab::FaultKind::kStraggler)
    Require(std::isfinite(fault->seconds) && fault->seconds > 0, "a straggler's seconds are finite and positive");
  const auto again = dtlab::ParseFaultSpec(dtlab::FaultSpecText(*fault));
  Require(again.ok(), "a spec's text parses");
  Require(again->replica == fault->replica && again->to == fault->to && again->step == fault->step &&
              again->phase == fault->phase && again->kind == fault->kind,
          "a spec's text parses to the same fault");
  dtlab::ClusterConfig cluster;
  cluster.replicas = replicas;
  cluster.strategy = dtlab::StrategyKind::kMirrored;
  cluster.faults = {*fault};
  const bool in_range = fault->replica < replicas && fault->to < replicas;
  Require(cluster.Validate().ok() == in_range, "Validate refuses exactly the faults naming absent replicas");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const Command command = kCommands[data[0] % std::size(kCommands)];
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string> args;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    args.emplace_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  {
    dtlab::cli::ParseOnlyScope parse_only;
    const int code = command(args);
    Require(code == 0 || code == 2, "parsing gives exit 0 or 2");
    Require((code == 2) == !dtlab::cli::ParseOnlyScope::last_error().empty(), "a usage error has a message");
  }
  const std::int32_t replicas = 1 + data[0] % 8;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--inject-fault" && i + 1 < args.size()) CheckFault(args[i + 1], replicas);
    if (args[i].rfind("--inject-fault=", 0) == 0) CheckFault(args[i].substr(15), replicas);
  }
  CheckFault(text, replicas);
  return 0;
}
