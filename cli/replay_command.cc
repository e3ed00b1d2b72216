// dtlab replay: runs a scenario on a device backend and holds every step against
// the CPU (scenarios/replay.h); dtlab devices: the GPUs, NCCL and the peer-to-peer
// matrix (sim/compute/cuda/cuda_backend.h). docs/gpu.md explains both.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/progress_line.h"
#include "cli/run_flags.h"
#include "scenarios/catalog.h"
#include "scenarios/replay.h"
#include "sim/compute/cuda/cuda_backend.h"

namespace dtlab::cli {
namespace {

namespace po = boost::program_options;

constexpr const char* kReplayDescription =
    R"(Replays a scenario on a device and holds every step against the CPU. Each run of the
scenario trains twice with the same configuration, on the CPU and on the device, and at
every step the loss, the reduced gradient and the variables after the update must be the
same bits (exact mode, the default). With --math fast both train in fast mode with the
reference check on: the device's gradient must lie within the floating-point bound of the
CPU's exact one-device gradient at every step where the CPU's does (a pitfall run that
fails the check by design must fail it on the device too).

Backends:
  cuda      the CUDA kernels on GPUs: replicas as streams (--streams per GPU), spread
            over --devices; needs a GPU (exit 2 when there is none: see dtlab devices)
  emulated  the same kernels called on the CPU: checks the kernel code without a GPU
            (--streams N gives it N lanes, each with its own buffers, as streams)
  cpu       the CPU itself; with --record FILE it stores the per-step digests that a
            replay elsewhere checks with --against FILE

After the steps comes one all-reduce of a step's gradient words across the replicas, in
nccl-tests' columns (NCCL with one replica per GPU, a reduction kernel for streams of one
GPU, the CPU ring otherwise); #wrong counts elements that differ from the exact sum.

Exit 0 when every step matches, 1 when one does not, 2 for a bad option, scenario or
record, or no CUDA device, 3 when a device fails. Guide: docs/gpu.md.)";

std::string Hex16(std::uint64_t v) {
  char text[20];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

void PrintReplay(const ReplayResult& r) {
  const bool exact = r.math == MathMode::kExact;
  std::printf("Replay of %s, %s mode\n  device:    %s\n  reference: %s\n\n", r.scenario.c_str(),
              std::string(MathModeName(r.math)).c_str(), r.device.c_str(), r.reference.c_str());
  if (r.runs.empty())
    std::printf("The scenario trains nothing (its checks compute on the CPU): only the all-reduce is replayed.\n");
  else if (exact)
    std::printf("%-16s %5s  %-15s %-16s %-16s %s\n", "run", "step", "loss", "gradient", "weights", "verdict");
  else
    std::printf("%-16s %5s  %-15s %-14s %s\n", "run", "step", "loss", "of the bound", "verdict");
  for (const ReplayRun& run : r.runs) {
    if (run.cpu_only) {
      std::printf("%-16s %5s  %s: not replayed\n", run.name.c_str(), "-", run.cpu_only_reason.c_str());
      continue;
    }
    for (const ReplayStep& s : run.steps) {
      if (exact) {
        std::string verdict = "bitwise equal";
        if (!s.passed) {
          verdict = "DIFFERS:";
          if (s.reference_loss != s.device_loss) verdict += " loss";
          if (s.reference_gradient != s.device_gradient)
            verdict +=
                s.first_differing_variable.empty() ? " gradient" : " gradient (" + s.first_differing_variable + ")";
          if (s.reference_weights != s.device_weights) verdict += " weights";
        }
        std::printf("%-16s %5lld  %-15.8e %-16s %-16s %s\n", run.name.c_str(), static_cast<long long>(s.step),
                    static_cast<double>(s.device_loss), Hex16(s.device_gradient).c_str(),
                    Hex16(s.device_weights).c_str(), verdict.c_str());
      } else {
        const char* verdict = s.within_bound
                                  ? (s.passed ? "within bound" : "within bound, NOT AS ON THE CPU")
                                  : (s.passed ? "outside the bound, as on the CPU (the pitfall)" : "OUTSIDE BOUND");
        std::printf("%-16s %5lld  %-15.8e %12.2e  %s\n", run.name.c_str(), static_cast<long long>(s.step),
                    static_cast<double>(s.device_loss), s.bound_fraction, verdict);
      }
    }
    if (run.steps.empty()) std::printf("%-16s %5s  no steps (%s)\n", run.name.c_str(), "-", run.device_status.c_str());
    if (!run.problem.empty()) std::printf("%-16s %5s  %s\n", run.name.c_str(), "-", run.problem.c_str());
  }
  if (r.all_reduce) {
    const ReplayAllReduce& a = *r.all_reduce;
    std::printf("\nAll-reduce of one step's gradient words (nccl-tests columns):\n");
    std::printf("%14s %9s %8s %12s %12s %12s %7s\n", "size(B)", "replicas", "method", "time(us)", "algbw(GB/s)",
                "busbw(GB/s)", "#wrong");
    std::printf("%14lld %9d %8s %12.1f %12.2f %12.2f %7lld\n", static_cast<long long>(a.bytes), a.replicas,
                a.method.c_str(), a.seconds * 1e6, a.algbw, a.busbw, static_cast<long long>(a.wrong));
  }
  if (r.steps_compared == 0) {
    const std::int64_t wrong = r.all_reduce ? r.all_reduce->wrong : 0;
    std::printf("\n%s: no step ran on the device (%s)\n", r.passed ? "PASS" : "FAIL",
                wrong != 0 ? "the all-reduce has wrong elements"
                : r.passed ? "every run of the scenario stays on the CPU"
                           : "see the runs above");
    return;
  }
  std::printf("\n%s: %lld steps compared, %lld differ%s\n", r.passed ? "PASS" : "FAIL",
              static_cast<long long>(r.steps_compared), static_cast<long long>(r.steps_failed),
              r.passed
                  ? (exact ? "; every step is bitwise equal to the reference" : "; every step has the CPU's verdict")
                  : "");
}

}  // namespace

int ReplayCommand(const std::vector<std::string>& args) {
  std::string file, backend = "cuda", devices_text, math = "exact";
  ReplayOptions replay;
  po::options_description options("Options");
  options.add_options()("scenario", po::value(&file), "a built-in scenario name (dtlab list) or a scenario file")(
      "backend", po::value(&backend)->default_value("cuda"), "cuda, emulated or cpu")(
      "devices", po::value(&devices_text), "GPUs to use, e.g. 0,1 (default: 0); one replica per GPU with NCCL")(
      "streams", po::value(&replay.streams)->default_value(0),
      "CUDA streams per GPU, or the emulated device's lanes (0: one per replica)")(
      "math", po::value(&math)->default_value("exact"), "exact (bitwise verdicts) or fast (within the float bound)")(
      "steps", po::value(&replay.max_steps)->default_value(-1),
      "stop each run after this many steps (default: all); faults after them are left out")(
      "set", po::value(&replay.sets)->composing(),
      "change the scenario: KEY=VALUE as in the file, e.g. cluster.replicas=1 (repeatable; as dtlab run --set)")(
      "record", po::value(&replay.record), "store the CPU run's per-step digests in this file (exact mode)")(
      "against", po::value(&replay.against), "compare with the digests of this record instead of a CPU run")(
      "json", "print the result as JSON");
  AddRunFlag(options, *FindRunOptionByFlag("threads"));  // as dtlab train's
  options.add_options()("no-progress", "never draw the progress line");
  po::positional_options_description positional;
  positional.add("scenario", 1);
  po::variables_map values;
  const int parsed = ParseOptions("replay", "SCENARIO --backend cuda|emulated|cpu [options]", kReplayDescription,
                                  options, args, values, &positional, nullptr,
                                  "  A scenario on two GPUs, every step held bit for bit against the CPU:\n"
                                  "    dtlab replay flagship --backend cuda --devices 0,1\n"
                                  "  The CUDA kernels on the CPU, where there is no GPU:\n"
                                  "    dtlab replay flagship --backend emulated --steps 5\n");
  if (parsed >= 0) return parsed;
  if (file.empty()) {
    std::fputs("dtlab replay: which scenario? Give a file or a built-in name (dtlab list shows them)\n", stderr);
    return 2;
  }
  if (replay.max_steps == 0 || replay.max_steps < -1) {
    std::fprintf(stderr, "dtlab replay: --steps must be at least 1, got %lld\n",
                 static_cast<long long>(replay.max_steps));
    return 2;
  }
  if (!ApplyThreadCount(values["threads"].as<int>())) return 2;
  auto mode = ParseMathMode(math);
  if (!mode.ok()) return ReportError("replay", mode.status().WithContext("--math"));
  auto devices = ParseDeviceList(devices_text);
  if (!devices.ok()) return ReportError("replay", devices.status());
  replay.backend = backend;
  replay.math = *mode;
  replay.devices = *devices;
  auto path = ResolveScenarioPath(file);
  if (!path.ok()) return ReportError("replay", path.status());
  auto scenario = LoadScenario(*path, replay.sets);
  if (!scenario.ok()) return ReportError("replay", scenario.status());

  ProgressLine line(!values.count("no-progress") && isatty(STDERR_FILENO));
  replay.observer = &line;
  auto result = ReplayScenario(*scenario, scenario->name, replay);
  line.Clear();
  if (!result.ok()) return ReportError("replay", result.status());
  if (values.count("json"))
    PrintJson(ReplayToJson(*result));
  else
    PrintReplay(*result);
  return result->passed ? 0 : 1;
}

int DevicesCommand(const std::vector<std::string>& args) {
  po::options_description options("Options");
  options.add_options()("json", "print the inventory as JSON");
  po::variables_map values;
  const int parsed =
      ParseOptions("devices", "[options]",
                   "Lists the CUDA GPUs dtlab replay can use: name, memory, compute capability, the CUDA runtime,\n"
                   "driver and NCCL versions, and which GPUs can read each other's memory directly (peer to peer).\n"
                   "Exit 0, also when there is no GPU (the output says why); docs/gpu.md.",
                   options, args, values, nullptr, nullptr,
                   "  The GPUs, as JSON:\n"
                   "    dtlab devices --json\n");
  if (parsed >= 0) return parsed;
  const CudaInventory inventory = QueryCudaDevices();
  if (values.count("json")) {
    nlohmann::json devices = nlohmann::json::array();
    for (const CudaDeviceInfo& d : inventory.devices)
      devices.push_back(
          {{"index", d.index},
           {"name", d.name},
           {"pci_bus_id", d.pci_bus_id},
           {"total_memory_bytes", d.total_memory},
           {"free_memory_bytes", d.free_memory},
           {"compute_capability", std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor)},
           {"multiprocessors", d.multiprocessors}});
    nlohmann::json out = {{"built_with_cuda", inventory.built_with_cuda},
                          {"cuda_runtime", inventory.runtime_version},
                          {"cuda_driver", inventory.driver_version},
                          {"nccl", inventory.nccl_version},
                          {"devices", devices},
                          {"peer_access", inventory.peer_access},
                          {"problem", inventory.problem}};
    PrintJson(out);
    return 0;
  }
  auto or_unknown = [](const std::string& s) { return s.empty() ? std::string("unknown") : s; };
  if (inventory.built_with_cuda)
    std::printf("CUDA runtime %s, driver %s, NCCL %s\n", or_unknown(inventory.runtime_version).c_str(),
                or_unknown(inventory.driver_version).c_str(), or_unknown(inventory.nccl_version).c_str());
  if (inventory.devices.empty()) {
    std::printf("%s\n", inventory.problem.c_str());
    return 0;
  }
  std::printf("\n%3s  %-32s %-22s %-8s %4s  %s\n", "GPU", "name", "memory free / total", "compute", "SMs", "PCI bus");
  for (const CudaDeviceInfo& d : inventory.devices) {
    char memory[64];
    std::snprintf(memory, sizeof memory, "%.1f / %.1f GiB", static_cast<double>(d.free_memory) / (1 << 30),
                  static_cast<double>(d.total_memory) / (1 << 30));
    std::printf("%3d  %-32s %-22s %d.%-6d %4d  %s\n", d.index, d.name.c_str(), memory, d.compute_major, d.compute_minor,
                d.multiprocessors, d.pci_bus_id.c_str());
  }
  std::printf("\nPeer-to-peer access (row reads column's memory directly):\n    ");
  for (const CudaDeviceInfo& d : inventory.devices) std::printf("%4d", d.index);
  std::printf("\n");
  for (std::size_t i = 0; i < inventory.devices.size(); ++i) {
    std::printf("%4d", inventory.devices[i].index);
    for (std::size_t j = 0; j < inventory.devices.size(); ++j)
      std::printf("%4s", i == j ? "-" : inventory.peer_access[i][j] ? "yes" : "no");
    std::printf("\n");
  }
  return 0;
}

}  // namespace dtlab::cli
