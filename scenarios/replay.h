// Replay: a scenario run on a device backend (sim/compute/device_backend.h), every step
// held against the CPU (docs/gpu.md).
//
// Exact mode (the default): each run of the scenario trains on the CPU and on the
// device with the same configuration, and at every step the loss, the reduced
// gradient and the variables after the update must be the same bits (compared
// through their digests). The CPU's digests can be stored (--record) and a later
// replay, on another machine say, checked against the file instead of rerunning
// the CPU.
//
// Fast mode: both sides train with --check-reference on. The device's gradient and
// loss of each step must be within the floating-point bound of the CPU's exact
// one-device gradient (sim/engines/reference_check.h) wherever the CPU's fast run is within
// its bound; a run that fails the check by design (a pitfall) must fail on both.
//
// Runs of the parameter-server strategy run on the CPU only (asynchronous
// updates); they are reported as such and not compared.
//
// Thread safety: one replay at a time per process (a CUDA device is shared).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/math_mode.h"
#include "core/status.h"
#include "scenarios/scenario.h"
#include "scenarios/scenario_runner.h"
#include "sim/compute/device_backend.h"

namespace dtlab {

struct ReplayOptions {
  std::string backend = "cuda";  // "cpu", "emulated" or "cuda" (BackendNames())
  std::vector<int> devices;      // CUDA device indices; empty: device 0
  int streams = 0;               // streams per GPU; 0: one per replica (spread over the devices)
  MathMode math = MathMode::kExact;
  std::int64_t max_steps = -1;  // per run; < 0: the scenario's own length
  std::string against;          // a record file to compare with instead of a CPU run
  std::string record;           // where to store the CPU run's digests (exact mode)
  std::string datasets_root;
  std::vector<std::string> sets;  // the --set overrides the scenario was loaded with (a record keeps them)
  ScenarioObserver* observer = nullptr;
};

/// One step of one run, as both sides computed it.
struct ReplayStep {
  std::int64_t step = 0;
  float reference_loss = 0, device_loss = 0;
  std::uint64_t reference_gradient = 0, device_gradient = 0;  // WeightsDigest of the reduced gradient
  std::uint64_t reference_weights = 0, device_weights = 0;    // of the variables after the step
  double bound_fraction = 0;                                  // fast mode: the worst |device - reference| / bound
  bool within_bound = true, reference_within_bound = true;    // fast mode: the device's and the CPU's verdicts
  bool passed = false;
  std::string first_differing_variable;  // exact mode: the first variable whose gradient differs (if known)
};

struct ReplayRun {
  std::string name;
  bool cpu_only = false;                        // parameter servers, a half policy: not run on the device
  std::string cpu_only_reason;                  // why, in words
  std::string reference_status, device_status;  // "ok" or the error that stopped the run
  std::vector<ReplayStep> steps;
  std::string problem;  // why the run does not pass, in words (empty if it does)
  bool passed = true;
};

/// An all-reduce of one step's gradient words, as nccl-tests prints it.
struct ReplayAllReduce {
  std::string method;  // "nccl", "streams" (one GPU) or "host" (the CPU ring)
  int replicas = 0;
  std::int64_t bytes = 0;
  double seconds = 0, algbw = 0, busbw = 0;  // GB/s
  std::int64_t wrong = 0;
};

struct ReplayResult {
  std::string scenario;
  std::string device;     // the backend's description
  std::string reference;  // "the CPU, in this process" or "record FILE"
  MathMode math = MathMode::kExact;
  std::vector<ReplayRun> runs;
  std::optional<ReplayAllReduce> all_reduce;
  std::int64_t steps_compared = 0, steps_failed = 0;
  bool passed = true;
};

/// The TrainConfig::make_compute_backend of `--backend NAME` ("cpu" gives none:
/// the CPU's BatchRunner). Streams per GPU: `streams`, or with 0 enough for one
/// per replica. The made backend's description goes to *description if not null
/// (which must outlive the factory). InvalidArgument for an unknown name.
StatusOr<std::function<StatusOr<std::unique_ptr<ComputeBackend>>(const Sequential<float>&)>> ComputeBackendFactory(
    const std::string& backend, const std::vector<int>& devices, int streams, int replicas,
    std::string* description = nullptr);

/// Replays `scenario`. NotFound when the backend needs a GPU and there is none;
/// InvalidArgument for bad options or a record of another scenario; errors of
/// loading data as RunScenario. A step that differs is a verdict (passed false),
/// not an error.
StatusOr<ReplayResult> ReplayScenario(const Scenario& scenario, const std::string& scenario_name,
                                      const ReplayOptions& options);

/// The result as JSON (the --json output).
nlohmann::json ReplayToJson(const ReplayResult& result);

}  // namespace dtlab
