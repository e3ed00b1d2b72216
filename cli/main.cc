// dtlab: a deterministic lab for data-parallel training. Entry point and dispatch.
#include <cstdio>
#include <filesystem>
#include <cerrno>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/man_page.h"
#include "core/file_io.h"
#include "core/text.h"

namespace {

constexpr const char* kUsage = R"(dtlab - a deterministic lab for data-parallel training

Usage: dtlab <command> [options]

Start here: 'dtlab run flagship' (4 replicas on Fashion-MNIST against the one-device
reference, then the classic pitfalls), 'dtlab list', 'dtlab lesson loss-scaling'.

Commands:
  train    train a model on one device or a virtual cluster (Fashion-MNIST by default), with checkpoints
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

// Each command by name, as Dispatch runs it.
struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>&);
};
constexpr Command kCommands[] = {
    {"train", dtlab::cli::TrainCommand},     {"eval", dtlab::cli::EvalCommand},
    {"run", dtlab::cli::RunCommand},         {"list", dtlab::cli::ListCommand},
    {"lesson", dtlab::cli::LessonCommand},   {"check", dtlab::cli::CheckCommand},
    {"cluster", dtlab::cli::ClusterCommand}, {"replay", dtlab::cli::ReplayCommand},
    {"devices", dtlab::cli::DevicesCommand},
};

// dtlab --man-page DIR (hidden; the build runs it): writes dtlab.1 and
// dtlab-COMMAND.1 for every command into DIR, each made from the --help text.
int WriteManPages(const std::string& directory) {
  std::error_code error;
  if (!std::filesystem::is_directory(directory, error)) {  // a wrong path is the caller's mistake: exit 2
    std::fprintf(stderr, "dtlab --man-page: %s is not a directory; create it first\n", directory.c_str());
    return 2;
  }
  auto write = [&](const std::string& name, const std::string& page) {
    const dtlab::Status written = dtlab::WriteFileAtomically(directory + "/" + name + ".1", page);
    if (!written.ok()) std::fprintf(stderr, "dtlab --man-page: %s\n", written.ToString().c_str());
    return written.ok();
  };
  if (!write("dtlab", dtlab::cli::HelpToRoff("dtlab", "a deterministic lab for data-parallel training", kUsage)))
    return 3;
  for (const auto& [command, run] : kCommands) {
    const std::string page = dtlab::cli::ManPageOf(run);
    if (page.empty()) {
      std::fprintf(stderr, "dtlab --man-page: dtlab %s --help gave no page\n", command);
      return 3;
    }
    if (!write(std::string("dtlab-") + command, page)) return 3;
  }
  return 0;
}

// Runs the command `argv[1]` names; its exit code.
int Dispatch(int argc, char** argv) {
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
  if (command == "--man-page") {
    if (argc != 3) {
      std::fputs("dtlab --man-page: give the directory to write the manual pages to\n", stderr);
      return 2;
    }
    return WriteManPages(argv[2]);
  }
  if (command == "--version") {
    std::puts("dtlab 0.1.0");
    return 0;
  }
  for (const Command& known : kCommands)
    if (command == known.name) return known.run(args);
  std::fprintf(stderr, "dtlab: unknown command '%s'\n\n%s", dtlab::EscapeControl(command).c_str(), kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int code;
  // Commands report their errors as Status; an exception that still escapes one is
  // a bug, but it gets a message and exit 3, not std::terminate's abort.
  try {
    code = Dispatch(argc, argv);
  } catch (const std::bad_alloc&) {
    // A run refuses up front what cannot fit (sim/training/memory_estimate.h); an
    // allocation that still fails is a runtime fault with a message.
    std::fputs(
        "dtlab: out of memory (std::bad_alloc): the run needs more memory than this machine gives it; use "
        "fewer --replicas or a smaller batch (docs/reliability.md, \"Memory\")\n",
        stderr);
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtlab: internal error: %s; this is a bug in dtlab, please report it\n",
                 dtlab::EscapeControl(e.what()).c_str());
    return 3;
  }
  // Output that did not reach stdout (a full disk, a closed pipe) is a failure,
  // not a success that printed nothing.
  std::cout.flush();
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
    std::fprintf(stderr, "dtlab: cannot write the output to standard output: %s\n", std::strerror(errno));
    return 3;
  }
  return code;
}
