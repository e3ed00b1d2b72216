#include "scenarios/replay.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "core/keras_model.h"
#include "core/text.h"
#include "sim/comm/collectives.h"
#include "sim/compute/cuda/cuda_backend.h"
#include "sim/compute/device_backend.h"

namespace dtlab {
namespace {

// Runs the device backends do not take, replayed on the CPU alone: parameter
// servers (asynchronous updates) and a half policy (the device kernels do not
// round to the half type; MakeDevicePlan refuses them).
// True if the run's model is a file with a BatchNormalization layer, which has no
// device kernel (a file that cannot be read says no: the run reports it).
bool HasBatchNormalization(const TrainConfig& config) {
  if (!IsModelFile(config.model)) return false;
  const auto text = ReadRegularFile(config.model, kMaxModelFileBytes, "model file");
  if (!text.ok()) return false;
  const nlohmann::json root = nlohmann::json::parse(*text, nullptr, false);
  if (!root.is_object() || !root.contains("config") || !root["config"].is_object()) return false;
  const nlohmann::json& model = root["config"];
  if (!model.contains("layers") || !model["layers"].is_array()) return false;
  return std::any_of(model["layers"].begin(), model["layers"].end(), [](const nlohmann::json& layer) {
    return layer.is_object() && layer.value("class_name", "") == "BatchNormalization";
  });
}

bool CpuOnly(const TrainConfig& config) {
  return config.cluster.strategy == StrategyKind::kParameterServer || config.cluster.precision.half() ||
         HasBatchNormalization(config);
}

std::string CpuOnlyReason(const TrainConfig& config) {
  if (config.cluster.precision.half())
    return "a half policy (--precision) runs on the CPU only: the device kernels compute in float32";
  if (config.cluster.strategy == StrategyKind::kParameterServer) return "parameter servers run on the CPU only";
  return "BatchNormalization runs on the CPU only: it has no device kernel";
}

using nlohmann::json;

constexpr const char* kRecordFormat = "dtlab-replay-record";

std::string Hex(std::uint64_t value, int digits) {
  char text[20];
  std::snprintf(text, sizeof text, "%0*llx", digits, static_cast<unsigned long long>(value));
  return text;
}

std::uint32_t FloatBits(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

float FloatFromHex(const std::string& hex) {
  const auto bits = static_cast<std::uint32_t>(std::stoul(hex, nullptr, 16));
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

std::string StatusText(const Status& status) { return status.ok() ? "ok" : status.message(); }

// The runs of a scenario result as ReplayRuns holding one side's numbers.
struct Side {
  std::vector<std::string> names, statuses;
  std::vector<std::vector<StepMetrics>> steps;
};

Side SideOf(const ScenarioResult& result) {
  Side side;
  for (const RunResult& r : result.runs) {
    side.names.push_back(r.name);
    side.statuses.push_back(StatusText(r.status));
    side.steps.push_back(r.steps);
  }
  return side;
}

json RecordJson(const std::string& scenario, const ReplayOptions& options, const Side& side) {
  json runs = json::array();
  for (std::size_t r = 0; r < side.names.size(); ++r) {
    json steps = json::array();
    for (const StepMetrics& m : side.steps[r]) {
      json variables = json::array();
      for (const std::uint64_t d : m.variable_gradient_digests) variables.push_back(Hex(d, 16));
      steps.push_back({{"step", m.step},
                       {"loss", Hex(FloatBits(m.loss), 8)},
                       {"loss_value", m.loss},
                       {"gradient", Hex(m.gradient_digest, 16)},
                       {"weights", Hex(m.weights_digest, 16)},
                       {"variable_gradients", std::move(variables)}});
    }
    runs.push_back({{"name", side.names[r]}, {"status", side.statuses[r]}, {"steps", std::move(steps)}});
  }
  return {{"format", kRecordFormat},        {"version", 1},        {"scenario", scenario},   {"math", "exact"},
          {"max_steps", options.max_steps}, {"set", options.sets}, {"runs", std::move(runs)}};
}

Status WriteRecord(const std::string& path, const json& record) {
  // A scenario given as a path that is not UTF-8 shows as U+FFFD, not an exception.
  const std::string text = record.dump(1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
  return WriteFileAtomically(path, text + "\n").WithContext("--record: cannot write " + path);
}

StatusOr<Side> ReadRecord(const std::string& path, const std::string& scenario, const ReplayOptions& options) {
  StatusOr<std::string> text = ReadRegularFile(path, kMaxTextFileBytes, "replay record");
  if (!text.ok()) return text.status().WithContext("--against: cannot read " + path);
  const std::string where = "--against " + path + ": ";
  // A record nests 6 levels (runs, a run, its steps, a step, its digests).
  if (const std::string error = JsonNestingError(*text, 8); !error.empty())
    return Status::Corruption(where + "not a replay record: it " + error + "; record it again");
  try {
    const json record = json::parse(*text);
    if (!record.is_object() || record.value("format", "") != kRecordFormat)
      return Status::InvalidArgument(where +
                                     "not a replay record (write one with dtlab replay SCENARIO --backend cpu "
                                     "--record FILE)");
    if (record.value("version", 0) != 1)
      return Status::InvalidArgument(where + "record version " + std::to_string(record.value("version", 0)) +
                                     " is not 1; record it again with this dtlab");
    if (record.value("scenario", "") != scenario)
      return Status::InvalidArgument(where + "the record is of scenario '" + record.value("scenario", "") + "', not '" +
                                     scenario + "'");
    if (record.value("max_steps", std::int64_t{-1}) != options.max_steps)
      return Status::InvalidArgument(
          where + "the record was made with --steps " + std::to_string(record.value("max_steps", std::int64_t{-1})) +
          ", this replay has " + std::to_string(options.max_steps) + "; use the same --steps");
    if (record.value("set", std::vector<std::string>{}) != options.sets)
      return Status::InvalidArgument(where + "the record was made with other --set values (" +
                                     record.value("set", json::array()).dump() + "); use the same");
    Side side;
    for (const json& run : record.at("runs")) {
      side.names.push_back(EscapeControl(run.at("name").get<std::string>()));
      side.statuses.push_back(EscapeControl(run.at("status").get<std::string>()));
      std::vector<StepMetrics> steps;
      for (const json& s : run.at("steps")) {
        StepMetrics m;
        m.step = s.at("step").get<std::int64_t>();
        m.loss = FloatFromHex(s.at("loss").get<std::string>());
        m.gradient_digest = std::stoull(s.at("gradient").get<std::string>(), nullptr, 16);
        m.weights_digest = std::stoull(s.at("weights").get<std::string>(), nullptr, 16);
        for (const json& d : s.value("variable_gradients", json::array()))
          m.variable_gradient_digests.push_back(std::stoull(d.get<std::string>(), nullptr, 16));
        steps.push_back(m);
      }
      side.steps.push_back(std::move(steps));
    }
    return side;
  } catch (const std::exception& e) {
    return Status::Corruption(where + "damaged record (" + e.what() + "); record it again");
  }
}

// One ring all-reduce of `elements` int64 words over `replicas` host buffers.
ReplayAllReduce MeasureHostAllReduce(int replicas, std::int64_t elements) {
  ReplayAllReduce m;
  m.method = "host";
  m.replicas = replicas;
  m.bytes = elements * static_cast<std::int64_t>(sizeof(std::int64_t));
  auto pattern = [](std::int64_t i, int r) { return (i % 1021) * (r + 1) - 500 + r; };
  std::vector<std::vector<std::int64_t>> data(static_cast<std::size_t>(replicas));
  double best = 1e300;
  for (int run = 0; run < 4; ++run) {  // run 0 warms up
    for (int r = 0; r < replicas; ++r) {
      auto& d = data[static_cast<std::size_t>(r)];
      d.resize(static_cast<std::size_t>(elements));
      for (std::int64_t i = 0; i < elements; ++i) d[static_cast<std::size_t>(i)] = pattern(i, r);
    }
    std::vector<std::span<std::int64_t>> buffers(data.begin(), data.end());
    const auto start = std::chrono::steady_clock::now();
    AllReduce<std::int64_t>(buffers, ReduceOp::kSum, CollectiveOptions{});
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (run > 0) best = std::min(best, seconds);
  }
  for (std::int64_t i = 0; i < elements; ++i) {
    std::int64_t expected = 0;
    for (int r = 0; r < replicas; ++r) expected += pattern(i, r);
    for (const auto& d : data) m.wrong += d[static_cast<std::size_t>(i)] != expected;
  }
  m.seconds = best;
  m.algbw = best > 0 ? static_cast<double>(m.bytes) / best / 1e9 : 0;
  m.busbw = m.algbw * 2.0 * (replicas - 1) / replicas;
  return m;
}

// The replicas an all-reduce line measures: the scenario's main run's, up to the
// count above which a cluster folds its gradients instead of all-reducing them
// (docs/cluster.md, "Folded reduction"; 4096 buffers of exact words would measure
// nothing a run does).
int MeasuredReplicas(int main_replicas) { return std::clamp(main_replicas, 1, ClusterConfig{}.fold_above); }

// The all-reduce line: on the GPUs for the cuda backend, else the CPU's ring.
StatusOr<ReplayAllReduce> MeasureAllReduce(const ReplayOptions& options, int replicas, std::int64_t elements) {
  if (options.backend != "cuda") return MeasureHostAllReduce(replicas, elements);
  DTLAB_ASSIGN_OR_RETURN(const AllReduceMeasurement m, MeasureCudaAllReduce(options.devices, replicas, elements));
  return ReplayAllReduce{m.method, replicas, m.bytes, m.seconds, m.algbw, m.busbw, m.wrong};
}

// One side of the replay: every run of the scenario, with digests.
StatusOr<ScenarioResult> RunSide(const Scenario& scenario, const ReplayOptions& options,
                                 std::function<void(TrainConfig&)> adjust) {
  ScenarioRunOptions run;
  run.observer = options.observer;
  run.datasets_root = options.datasets_root;
  run.record_digests = true;
  run.adjust_config = std::move(adjust);
  return RunScenario(scenario, run);
}

std::vector<std::vector<bool>> PassFlags(const ScenarioResult& result) {
  std::vector<std::vector<bool>> flags;
  for (const RunResult& r : result.runs) {
    flags.emplace_back();
    for (const StepMetrics& m : r.steps) flags.back().push_back(m.passed);
  }
  return flags;
}

}  // namespace

StatusOr<std::function<StatusOr<std::unique_ptr<ComputeBackend>>(const Sequential<float>&)>> ComputeBackendFactory(
    const std::string& backend, const std::vector<int>& devices, int streams, int replicas, std::string* description) {
  using Made = StatusOr<std::unique_ptr<ComputeBackend>>;
  using Factory = std::function<Made(const Sequential<float>&)>;
  if (backend != "cuda" && !devices.empty())
    return Status::InvalidArgument("--devices chooses GPUs: it goes with --backend cuda");
  if (backend == "cpu" && streams != 0)
    return Status::InvalidArgument("--streams goes with --backend cuda (streams per GPU) or emulated (lanes)");
  if (backend == "cpu")
    return Factory([](const Sequential<float>&) -> Made { return std::unique_ptr<ComputeBackend>(); });
  if (backend != "emulated" && backend != "cuda")
    return Status::InvalidArgument("--backend must be cpu, emulated or cuda, got '" + backend + "'");
  if (streams < 0)
    return Status::InvalidArgument("--streams must be 0 (one per replica) or a count of streams, got " +
                                   std::to_string(streams));
  return Factory([=](const Sequential<float>& model) -> Made {
    DTLAB_ASSIGN_OR_RETURN(DevicePlan plan, MakeDevicePlan(model));
    std::unique_ptr<DeviceRunner> runner;
    const int gpus = std::max<int>(1, static_cast<int>(devices.size()));
    const int per_gpu = streams > 0 ? streams : std::max(1, (replicas + gpus - 1) / gpus);
    if (backend == "emulated") {
      runner = MakeHostRunner(std::move(plan), per_gpu);
    } else {
      DTLAB_ASSIGN_OR_RETURN(runner, MakeCudaRunner(std::move(plan), devices, per_gpu));
    }
    if (description) *description = runner->Description();
    return MakeDeviceBackend(model, std::move(runner));
  });
}

StatusOr<ReplayResult> ReplayScenario(const Scenario& scenario, const std::string& scenario_name,
                                      const ReplayOptions& options) {
  const bool exact = options.math == MathMode::kExact;
  const std::vector<std::string>& names = BackendNames();
  if (std::find(names.begin(), names.end(), options.backend) == names.end())
    return Status::InvalidArgument("--backend must be cpu, emulated or cuda, got '" + options.backend + "'");
  if (!exact && (!options.against.empty() || !options.record.empty()))
    return Status::InvalidArgument(
        "--record and --against hold exact-mode digests; fast mode replays against the "
        "CPU in the same process (drop them, or use --math exact)");
  if (options.backend != "cpu" && !options.record.empty() && !options.against.empty())
    return Status::InvalidArgument("--record stores a CPU run's digests; with --against there is no CPU run");
  if (options.backend == "cpu" && !options.against.empty())
    return Status::InvalidArgument("--against compares a device with a record; --backend cpu is the recording side");
  if (options.backend == "cpu" && !exact)
    return Status::InvalidArgument(
        "--backend cpu --math fast compares nothing: fast mode checks a device against the "
        "CPU's exact gradient; pick --backend emulated or cuda");
  DTLAB_RETURN_IF_ERROR(ComputeBackendFactory(options.backend, options.devices, options.streams, 1).status());
  // A record aimed at a device, a FIFO or a directory is refused now, not after the run.
  if (!options.record.empty()) DTLAB_RETURN_IF_ERROR(ResolveOutputPath(options.record, "--record").status());
  ReplayResult result;
  result.scenario = scenario_name;
  result.math = options.math;
  if (scenario.runs.empty() && !options.against.empty())
    return Status::InvalidArgument("--against: scenario '" + scenario_name +
                                   "' trains nothing, so no record holds "
                                   "steps of it");

  // Fail early, before any training, when the device is missing.
  if (options.backend == "cuda") {
    auto probe = MakeCudaRunner(DevicePlan{{}, {0}, 0, 0}, options.devices, 1);
    if (!probe.ok()) return probe.status();
  }

  // A scenario of checks alone (loss cases, all-reduce drawings) trains nothing:
  // only the all-reduce runs on the device, over the replicas its checks name and
  // the gradient words of the seed model on Fashion-MNIST.
  if (scenario.runs.empty()) {
    int replicas = 4;
    for (const ScenarioCheck& check : scenario.checks) replicas = std::max(replicas, static_cast<int>(check.replicas));
    DTLAB_ASSIGN_OR_RETURN(const auto seed_model, MakeModel<float>("seed-cnn", {28, 28, 1}, 10));
    const std::int64_t kSeedModelValues = seed_model->num_parameter_values();
    result.reference = "nothing: the scenario trains nothing (its checks compute on the CPU); the all-reduce alone";
    result.device = options.backend;
    DTLAB_ASSIGN_OR_RETURN(result.all_reduce, MeasureAllReduce(options, replicas, kSeedModelValues * kExactWords));
    result.passed = result.all_reduce->wrong == 0;
    return result;
  }

  std::int64_t parameter_values = 0;
  std::vector<std::string> variable_names;  // of the last run's model
  int main_replicas = 0;
  std::string description = options.backend == "cpu" ? "cpu: BatchRunner (ordered GEMMs)" : "";
  auto configure = [&](bool device) {
    return [&, device](TrainConfig& config) {
      config.cluster.math = options.math;
      if (options.max_steps > 0) {
        config.max_steps = options.max_steps;
        // A fault after the last step would never fire (and train refuses one):
        // the shortened runs leave it out.
        std::erase_if(config.cluster.faults, [&](const FaultSpec& f) { return f.step > options.max_steps; });
      }
      // Exact mode compares digests with the CPU; fast mode needs the bound check.
      config.cluster.check_reference = !exact;
      if (main_replicas == 0) main_replicas = config.cluster.replicas;
      const bool on_device = device && !CpuOnly(config);
      auto factory = on_device ? ComputeBackendFactory(options.backend, options.devices, options.streams,
                                                       config.cluster.replicas, &description)
                               : ComputeBackendFactory("cpu", {}, 0, config.cluster.replicas);
      config.make_compute_backend = [&, made = *factory](const Sequential<float>& model) {  // the name was checked
        parameter_values = model.num_parameter_values();
        variable_names.clear();
        for (const ModelParameter& p : model.parameters()) variable_names.push_back(p.name);
        return made(model);
      };
    };
  };

  // The reference side: a record, or the CPU here.
  Side reference;
  std::vector<std::vector<bool>> reference_passed;  // fast mode: the CPU's reference-check verdicts
  if (!options.against.empty()) {
    DTLAB_ASSIGN_OR_RETURN(reference, ReadRecord(options.against, scenario_name, options));
    result.reference = "the record " + options.against;
  } else {
    DTLAB_ASSIGN_OR_RETURN(ScenarioResult cpu_result, RunSide(scenario, options, configure(false)));
    reference = SideOf(cpu_result);
    result.reference = exact ? "the CPU, in this process"
                             : "the CPU's exact one-device gradient of each step, within the float bound; the CPU's "
                               "own fast-mode verdicts, in this process";
    reference_passed = PassFlags(cpu_result);
    if (!options.record.empty())
      DTLAB_RETURN_IF_ERROR(WriteRecord(options.record, RecordJson(scenario_name, options, reference)));
  }
  if (options.backend == "cpu") {
    result.device = description;
    for (std::size_t r = 0; r < reference.names.size(); ++r) {
      ReplayRun run;
      run.name = reference.names[r];
      run.reference_status = run.device_status = reference.statuses[r];
      for (const StepMetrics& m : reference.steps[r]) {
        ReplayStep step;
        step.step = m.step;
        step.reference_loss = step.device_loss = m.loss;
        step.reference_gradient = step.device_gradient = m.gradient_digest;
        step.reference_weights = step.device_weights = m.weights_digest;
        step.passed = true;
        run.steps.push_back(step);
      }
      result.runs.push_back(std::move(run));
    }
    result.all_reduce = MeasureHostAllReduce(MeasuredReplicas(main_replicas), parameter_values * kExactWords);
    for (const auto& run : result.runs) result.steps_compared += static_cast<std::int64_t>(run.steps.size());
    return result;
  }

  DTLAB_ASSIGN_OR_RETURN(ScenarioResult device_result, RunSide(scenario, options, configure(true)));
  result.device = description.empty() ? options.backend + " (no run of this scenario runs on it)" : description;

  for (std::size_t r = 0; r < device_result.runs.size(); ++r) {
    const RunResult& d = device_result.runs[r];
    ReplayRun run;
    run.name = d.name;
    run.cpu_only = d.run && CpuOnly(d.run->config);
    if (run.cpu_only) run.cpu_only_reason = CpuOnlyReason(d.run->config);
    run.device_status = StatusText(d.status);
    if (exact) {
      if (r >= reference.names.size() || reference.names[r] != d.name) {
        run.passed = false;
        run.problem = "the reference has no run '" + d.name + "'";
        result.runs.push_back(std::move(run));
        continue;
      }
      run.reference_status = reference.statuses[r];
      const auto& ref_steps = reference.steps[r];
      for (std::size_t s = 0; s < d.steps.size(); ++s) {
        const StepMetrics& m = d.steps[s];
        ReplayStep step;
        step.step = m.step;
        step.device_loss = m.loss;
        step.device_gradient = m.gradient_digest;
        step.device_weights = m.weights_digest;
        if (s < ref_steps.size()) {
          const StepMetrics& c = ref_steps[s];
          step.reference_loss = c.loss, step.reference_gradient = c.gradient_digest;
          step.reference_weights = c.weights_digest;
          step.passed = c.step == m.step && FloatBits(c.loss) == FloatBits(m.loss) &&
                        c.gradient_digest == m.gradient_digest && c.weights_digest == m.weights_digest;
          // Name the first variable whose gradient differs: where to look first.
          for (std::size_t v = 0; v < m.variable_gradient_digests.size() && v < c.variable_gradient_digests.size() &&
                                  v < variable_names.size();
               ++v)
            if (m.variable_gradient_digests[v] != c.variable_gradient_digests[v]) {
              step.first_differing_variable = variable_names[v];
              break;
            }
        }
        run.steps.push_back(step);
      }
      if (ref_steps.size() != d.steps.size())
        run.problem = "the reference has " + std::to_string(ref_steps.size()) + " steps, the device " +
                      std::to_string(d.steps.size());
      else if (run.reference_status != run.device_status)
        run.problem =
            "the reference ended with '" + run.reference_status + "', the device with '" + run.device_status + "'";
    } else {
      // Fast mode: a step passes when the device's gradient is within the bound of
      // the exact reference wherever the CPU's is; a pitfall the CPU fails by
      // design (a wrong loss denominator, say) must fail on the device too.
      run.reference_status = r < reference.statuses.size() ? reference.statuses[r] : "missing";
      const std::vector<bool> none;
      const std::vector<bool>& cpu = r < reference_passed.size() ? reference_passed[r] : none;
      for (std::size_t s = 0; s < d.steps.size(); ++s) {
        const StepMetrics& m = d.steps[s];
        ReplayStep step;
        step.step = m.step;
        step.reference_loss = step.device_loss = m.loss;
        step.bound_fraction = m.max_bound_fraction;
        step.within_bound = m.passed;
        step.reference_within_bound = s < cpu.size() && cpu[s];
        step.passed = run.cpu_only || (s < cpu.size() && m.passed == cpu[s]);
        run.steps.push_back(step);
      }
      if (cpu.size() != d.steps.size())
        run.problem =
            "the CPU has " + std::to_string(cpu.size()) + " steps, the device " + std::to_string(d.steps.size());
    }
    for (const ReplayStep& s : run.steps)
      if (!s.passed && run.problem.empty())
        run.problem = "step " + std::to_string(s.step) +
                      (exact ? " differs from the reference" +
                                   (s.first_differing_variable.empty()
                                        ? std::string()
                                        : " (first in the gradient of " + s.first_differing_variable + ")")
                       : s.within_bound ? " is within the bound on the device but not on the CPU"
                                        : " is outside the float bound of the reference, where the CPU's is not");
    run.passed = run.problem.empty();
    result.runs.push_back(std::move(run));
  }
  for (const ReplayRun& run : result.runs) {
    result.passed &= run.passed;
    if (run.cpu_only) continue;  // its steps ran on the CPU on both sides: nothing was compared
    for (const ReplayStep& s : run.steps) result.steps_compared += 1, result.steps_failed += !s.passed;
  }

  // No run on the device (a half policy, parameter servers, no training run): no
  // gradient of its size to all-reduce there either.
  if (parameter_values > 0 && result.steps_compared > 0) {
    DTLAB_ASSIGN_OR_RETURN(result.all_reduce,
                           MeasureAllReduce(options, MeasuredReplicas(main_replicas), parameter_values * kExactWords));
    if (result.all_reduce->wrong != 0) result.passed = false;
  }
  return result;
}

json ReplayToJson(const ReplayResult& result) {
  json runs = json::array();
  for (const ReplayRun& run : result.runs) {
    json steps = json::array();
    for (const ReplayStep& s : run.steps)
      steps.push_back({{"step", s.step},
                       {"reference_loss", s.reference_loss},
                       {"device_loss", s.device_loss},
                       {"reference_gradient", Hex(s.reference_gradient, 16)},
                       {"device_gradient", Hex(s.device_gradient, 16)},
                       {"reference_weights", Hex(s.reference_weights, 16)},
                       {"device_weights", Hex(s.device_weights, 16)},
                       {"bound_fraction", s.bound_fraction},
                       {"within_bound", s.within_bound},
                       {"reference_within_bound", s.reference_within_bound},
                       {"first_differing_variable", s.first_differing_variable},
                       {"passed", s.passed}});
    runs.push_back({{"name", run.name},
                    {"cpu_only", run.cpu_only},
                    {"cpu_only_reason", run.cpu_only_reason},
                    {"reference_status", run.reference_status},
                    {"device_status", run.device_status},
                    {"passed", run.passed},
                    {"problem", run.problem},
                    {"steps", std::move(steps)}});
  }
  json out = {{"scenario", result.scenario},
              {"device", result.device},
              {"reference", result.reference},
              {"math", std::string(MathModeName(result.math))},
              {"steps_compared", result.steps_compared},
              {"steps_failed", result.steps_failed},
              {"passed", result.passed},
              {"runs", std::move(runs)}};
  if (result.all_reduce) {
    const ReplayAllReduce& a = *result.all_reduce;
    out["all_reduce"] = {
        {"method", a.method},    {"replicas", a.replicas}, {"size_bytes", a.bytes}, {"time_us", a.seconds * 1e6},
        {"algbw_gbps", a.algbw}, {"busbw_gbps", a.busbw},  {"wrong", a.wrong}};
  }
  return out;
}

}  // namespace dtlab
