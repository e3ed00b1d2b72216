// dtlab: a deterministic lab for data-parallel training. Entry point and dispatch.
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "cli/command.h"

namespace {

constexpr const char* kUsage = R"(dtlab - a deterministic lab for data-parallel training

Usage: dtlab <command> [options]

Start here: 'dtlab run flagship' (4 replicas on Fashion-MNIST against the one-device
reference, then the classic pitfalls), 'dtlab list', 'dtlab lesson loss-scaling'.

Commands:
  train    train a model on one device (Fashion-MNIST by default), with checkpoints
  eval     evaluate the latest checkpoint of a training run on the test set
  run      run a scenario (a TOML file or a built-in name) and print its verdicts
  list     list the built-in scenarios and lessons
  lesson   play a lesson in the terminal (predict, then see the real numbers)
  check    property checks of loss scaling over random clusters and batches (RapidCheck)
  cluster  show how a TF_CONFIG maps tasks onto ranks, which is the chief, and check it
  replay   replay a scenario on GPUs (CUDA) or the emulated device, every step held against the CPU
  devices  list the CUDA GPUs, their memory, NCCL and peer-to-peer access

Run 'dtlab <command> --help' for a command's options.
Exit codes: 0 success, 1 a check failed, 2 usage or input error, 3 runtime fault.
Docs: README.md and docs/ in the source tree.
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (command == "--version") {
    std::puts("dtlab 0.1.0");
    return 0;
  }
  // A run refuses up front what cannot fit (sim/memory_estimate.h); an allocation
  // that still fails is a runtime fault (exit 3) with a message, never an abort.
  try {
    if (command == "train") return dtlab::cli::TrainCommand(args);
    if (command == "eval") return dtlab::cli::EvalCommand(args);
    if (command == "check") return dtlab::cli::CheckCommand(args);
    if (command == "run") return dtlab::cli::RunCommand(args);
    if (command == "list") return dtlab::cli::ListCommand(args);
    if (command == "lesson") return dtlab::cli::LessonCommand(args);
    if (command == "cluster") return dtlab::cli::ClusterCommand(args);
    if (command == "replay") return dtlab::cli::ReplayCommand(args);
    if (command == "devices") return dtlab::cli::DevicesCommand(args);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "dtlab %s: out of memory (std::bad_alloc): the run needs more memory than this machine "
                         "gives it; use fewer --replicas or a smaller batch (docs/reliability.md, \"Memory\")\n",
                 command.c_str());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtlab %s: internal error: %s (please report it)\n", command.c_str(), e.what());
    return 3;
  }
  std::fprintf(stderr, "dtlab: unknown command '%s'\n\n%s", command.c_str(), kUsage);
  return 2;
}
