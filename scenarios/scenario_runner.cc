#include "scenarios/scenario_runner.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "core/mnist.h"
#include "core/text.h"
#include "scenarios/all_reduce_drawing.h"

namespace dtlab {
namespace {

// A Keras Mean metric that every replica fed its value: float32 total and count per
// replica, summed on read (SYNC_ON_READ, aggregation SUM), then divide_no_nan.
float MeanOverReplicas(const std::vector<float>& replica_values) {
  MeanMetric merged;
  for (const float value : replica_values) {
    MeanMetric replica;
    replica.UpdateState(std::span<const float>(&value, 1));
    merged.Merge(replica);
  }
  return merged.Result();
}

std::string Number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

ImageDataset TakeFirst(const ImageDataset& data, std::int64_t count) {
  if (count <= 0 || count >= data.count) return data;
  ImageDataset out = data;
  out.count = count;
  out.images.resize(static_cast<std::size_t>(count * data.image_size()));
  out.labels.resize(static_cast<std::size_t>(count));
  return out;
}

// Loads each source once; runs share it.
class DataCache {
 public:
  explicit DataCache(std::string root) : root_(std::move(root)) {}
  StatusOr<const TrainTestData*> Get(const ScenarioData& spec) {
    const std::string key =
        spec.source + "|" + std::to_string(spec.train_examples) + "|" + std::to_string(spec.test_examples);
    if (auto it = sliced_.find(key); it != sliced_.end()) return &it->second;
    TrainTestData data;
    if (spec.source == "synthetic") {
      data.name = "synthetic";
      data.train = MakeSyntheticDataset(spec.train_examples > 0 ? spec.train_examples : 2000, 28, 28, 10, 7);
      data.test = MakeSyntheticDataset(spec.test_examples > 0 ? spec.test_examples : 500, 28, 28, 10, 8);
    } else {
      auto full = full_.find(spec.source);
      if (full == full_.end()) {
        auto loaded = root_.empty() ? LoadMnistStyleDataset(spec.source) : LoadMnistStyleDataset(spec.source, root_);
        if (!loaded.ok()) return loaded.status();
        full = full_.emplace(spec.source, std::move(loaded).value()).first;
      }
      data = full->second;
      data.train = TakeFirst(data.train, spec.train_examples);
      data.test = TakeFirst(data.test, spec.test_examples);
    }
    return &sliced_.emplace(key, std::move(data)).first->second;
  }

 private:
  std::string root_;
  std::map<std::string, TrainTestData> full_, sliced_;
};

// Records every step of one run.
class Recorder final : public TrainObserver {
 public:
  Recorder(const ScenarioRun& run, ScenarioObserver* observer, std::vector<StepMetrics>& steps, bool digests)
      : run_(run), observer_(observer), steps_(steps), digests_(digests) {}
  bool WantsReducedGradient() const override { return digests_; }
  void OnTrainStep(const StepRecord& r) override {
    StepMetrics m;
    m.step = r.step;
    m.epoch = r.epoch;
    m.loss = r.result->loss;
    m.mean_loss = r.mean_loss;
    m.accuracy = r.accuracy;
    m.batch_sizes = r.result->replica_batch_sizes;
    m.replica_losses = r.result->replica_losses;
    m.max_example_weight = r.result->max_example_weight;
    if (r.result->check) {
      m.checked = true;
      m.passed = r.result->check->within_bound;
      m.max_ulp = r.result->check->max_ulp;
      m.distributed_norm = r.result->check->distributed_norm;
      m.reference_norm = r.result->check->reference_norm;
      m.max_bound_fraction = r.result->check->max_bound_fraction;
      if (!m.passed && first_failure.empty()) first_failure = r.result->check->explanation;
    }
    if (digests_ && r.reduced_gradient) {
      m.gradient_digest = WeightsDigest(*r.reduced_gradient);
      for (const Tensor<float>& g : *r.reduced_gradient) m.variable_gradient_digests.push_back(WeightsDigest({g}));
    }
    if (digests_ && r.variables) m.weights_digest = WeightsDigest(*r.variables);
    m.compute_seconds = r.compute_seconds;
    for (const auto& c : r.collectives) m.collectives.emplace_back(c.name, c.seconds);
    for (const auto& replica : *r.examples)
      for (const auto index : replica) seen.insert(index), ++examples;
    steps_.push_back(std::move(m));
    if (observer_) observer_->OnStep(run_, r.step, run_.config.max_steps);
  }
  std::string first_failure;
  std::set<std::int64_t> seen;
  std::int64_t examples = 0;

 private:
  const ScenarioRun& run_;
  ScenarioObserver* observer_;
  std::vector<StepMetrics>& steps_;
  bool digests_;
};

void ComputeValues(RunResult& result, const Recorder& recorder) {
  const TrainReport& report = result.report;
  const TrainConfig& config = result.run->config;
  const auto& steps = result.steps;
  std::map<std::string, double> v;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  v["steps"] = static_cast<double>(report.steps);
  v["resumed_from_step"] = static_cast<double>(std::max<std::int64_t>(report.resumed_from_step, 0));
  v["replicas"] = config.cluster.replicas;
  v["global_batch"] = static_cast<double>(config.global_batch_size());
  v["first_loss"] = steps.empty() ? nan : steps.front().loss;
  v["final_loss"] = steps.empty() ? nan : steps.back().loss;
  v["train_accuracy"] = report.epochs.empty() ? nan : report.epochs.back().train_accuracy;
  v["test_accuracy"] = report.final_test_accuracy;
  v["test_loss"] = report.final_test_loss;
  if (report.reference_check) {
    v["steps_failed"] = static_cast<double>(report.reference_check->steps_failed);
    v["first_failed_step"] = static_cast<double>(std::max<std::int64_t>(report.reference_check->first_failed_step, 0));
    v["max_ulp"] = static_cast<double>(report.reference_check->max_ulp);
  }
  auto ratio = [nan](const StepMetrics& m) {
    return m.reference_norm > 0 ? m.distributed_norm / m.reference_norm : nan;
  };
  if (!steps.empty() && steps.front().checked) {
    v["gradient_ratio"] = ratio(steps.front());
    v["last_gradient_ratio"] = ratio(steps.back());
    double most = 0;
    for (const auto& m : steps) most = std::max(most, ratio(m));
    v["max_gradient_ratio"] = most;
  }
  if (!steps.empty()) {
    // What a Keras Mean metric reads when every replica feeds it its scaled loss
    // (float32 total and count per replica, summed on read), against their SUM
    // (strategy.reduce), which is the real loss.
    v["sum_reduced_loss"] = steps.front().loss;
    v["mean_metric_loss"] = MeanOverReplicas(steps.front().replica_losses);
    v["mean_metric_ratio"] = v["sum_reduced_loss"] / v["mean_metric_loss"];
  }
  std::int64_t empty = 0, short_steps = 0, most_empty = 0;
  for (const auto& m : steps) {
    std::int64_t total = 0, empty_replicas = 0;
    for (const auto b : m.batch_sizes) total += b, empty_replicas += b == 0;
    empty += empty_replicas > 0;
    most_empty = std::max(most_empty, empty_replicas);
    short_steps += total < config.step_batch_size();
  }
  v["empty_replica_steps"] = static_cast<double>(empty);
  v["max_empty_replicas"] = static_cast<double>(most_empty);
  v["short_steps"] = static_cast<double>(short_steps);
  v["examples"] = static_cast<double>(recorder.examples);
  v["distinct_fraction"] =
      recorder.examples > 0 ? static_cast<double>(recorder.seen.size()) / static_cast<double>(recorder.examples) : nan;
  if (!report.staleness.empty()) {
    double sum = 0, most = 0;
    for (const auto s : report.staleness) sum += static_cast<double>(s), most = std::max(most, static_cast<double>(s));
    v["staleness_mean"] = sum / static_cast<double>(report.staleness.size());
    v["staleness_max"] = most;
  }
  v["simulated_seconds"] = report.simulated_seconds;
  v["collective_seconds"] = report.simulated_collective_seconds;
  v["collective_bytes"] = static_cast<double>(report.collective_bytes);
  if (config.cluster.accumulation.on()) {  // only accumulating runs have these
    v["accumulation_steps"] = static_cast<double>(config.cluster.accumulation.steps);
    v["step_batch"] = static_cast<double>(config.step_batch_size());
    double heaviest = 0;
    for (const auto& m : steps) heaviest = std::max(heaviest, m.max_example_weight);
    v["max_example_weight"] = steps.empty() ? nan : heaviest;
  }
  if (config.cluster.precision.dynamic_loss_scale) {  // only loss-scaled runs have these
    v["skipped_steps"] = static_cast<double>(report.skipped_steps);
    v["loss_scale"] = report.epochs.empty() ? nan : static_cast<double>(report.epochs.back().loss_scale);
  }
  for (const auto& [name, meaning] : ScenarioValueNames())
    if (auto it = v.find(name); it != v.end()) result.values.emplace_back(name, it->second);
}

const RunResult* FindRun(const std::vector<RunResult>& runs, const std::string& name) {
  for (const auto& r : runs)
    if (r.name == name) return &r;
  return nullptr;
}

std::string StatusWord(const RunResult& r) {
  if (r.refused()) return "REFUSED";
  if (r.faulted()) return "FAULT";
  return "ERROR";
}

CheckVerdict Evaluate(const ScenarioCheck& check, const std::vector<RunResult>& runs) {
  CheckVerdict v;
  v.check = &check;
  const RunResult* run = runs.empty() ? nullptr : FindRun(runs, check.runs.front());
  const std::string on = " (" + check.runs.front() + ")";
  auto run_failed = [&](const RunResult& r) {
    v.got = StatusWord(r);
    v.detail = r.status.message();
  };
  switch (check.kind) {
    case ScenarioCheckKind::kReference: {
      v.label = "reference check" + on;
      v.expected = check.expect_pass ? "PASS" : "FAIL";
      if (!run->status.ok()) {
        run_failed(*run);
        break;
      }
      if (!run->report.reference_check) {
        v.got = "NOT RUN";
        v.detail = "the run has check_reference = false";
        break;
      }
      const ReferenceCheckSummary& c = *run->report.reference_check;
      v.passed = c.within_bound;
      v.got = v.passed ? "PASS" : "FAIL";
      if (v.passed)
        v.detail = std::to_string(c.steps_checked) + " of " + std::to_string(c.steps_checked) + " steps " +
                   (c.exact ? "bitwise equal to one device"
                            : "within the floating-point bound (the largest error was " +
                                  Number(100 * c.max_bound_fraction) + "% of its bound)");
      else
        v.detail = std::to_string(c.steps_failed) + " of " + std::to_string(c.steps_checked) +
                   " steps failed, first at step " + std::to_string(c.first_failed_step) + ": " + c.first_failure;
      break;
    }
    case ScenarioCheckKind::kBitwiseEqual: {
      const RunResult* other = FindRun(runs, check.runs[1]);
      v.label = "final weights bitwise equal (" + check.runs[0] + ", " + check.runs[1] + ")";
      v.expected = check.expect_pass ? "EQUAL" : "DIFFERENT";
      if (!run->status.ok()) {
        run_failed(*run);
        break;
      }
      if (!other->status.ok()) {
        run_failed(*other);
        break;
      }
      v.passed = run->report.weights_digest == other->report.weights_digest;
      v.got = v.passed ? "EQUAL" : "DIFFERENT";
      char text[96];
      std::snprintf(text, sizeof text, "weight digests %016llx and %016llx",
                    static_cast<unsigned long long>(run->report.weights_digest),
                    static_cast<unsigned long long>(other->report.weights_digest));
      v.detail = text;
      break;
    }
    case ScenarioCheckKind::kValue: {
      std::optional<double> approx = check.approx;
      if (!check.approx_value.empty() && run->status.ok()) approx = run->Value(check.approx_value);
      std::string range;
      if (!check.approx_value.empty())
        range = " ~ " + check.approx_value;
      else if (approx)
        range = " ~ " + Number(*approx);
      if (approx) range += " (+-" + Number(check.tolerance * 100) + "%)";
      if (check.min) range += " >= " + Number(*check.min);
      if (check.max) range += " <= " + Number(*check.max);
      v.label = check.value + on + range;
      v.expected = check.expect_pass ? "PASS" : "FAIL";
      if (!run->status.ok()) {
        run_failed(*run);
        break;
      }
      const double x = run->Value(check.value);
      v.passed = std::isfinite(x);
      if (approx) v.passed &= std::abs(x - *approx) <= check.tolerance * std::abs(*approx);
      if (check.min) v.passed &= x >= *check.min;
      if (check.max) v.passed &= x <= *check.max;
      v.got = v.passed ? "PASS" : "FAIL";
      v.detail = check.value + " = " + Number(x);
      if (!check.approx_value.empty()) v.detail += ", " + check.approx_value + " = " + Number(*approx);
      v.numbers.emplace_back("value", x);
      break;
    }
    case ScenarioCheckKind::kCompare: {
      const RunResult* other = FindRun(runs, check.runs[1]);
      v.label = check.value + ": " + check.runs[0] + " < " + check.runs[1];
      v.expected = check.expect_pass ? "PASS" : "FAIL";
      if (!run->status.ok()) {
        run_failed(*run);
        break;
      }
      if (!other->status.ok()) {
        run_failed(*other);
        break;
      }
      const double a = run->Value(check.value), b = other->Value(check.value);
      v.passed = a < b;
      v.got = v.passed ? "PASS" : "FAIL";
      v.detail = check.runs[0] + " " + Number(a) + ", " + check.runs[1] + " " + Number(b);
      break;
    }
    case ScenarioCheckKind::kRefused:
    case ScenarioCheckKind::kFault: {
      const bool refusal = check.kind == ScenarioCheckKind::kRefused;
      v.label = std::string(refusal ? "refused" : "stops with a runtime fault") + on;
      v.expected = check.expect_pass ? (refusal ? "REFUSED" : "FAULT") : "RUNS";
      v.passed = (refusal ? run->refused() : run->faulted()) &&
                 run->status.message().find(check.contains) != std::string::npos;
      v.got = run->status.ok() ? "RUNS" : StatusWord(*run);
      v.detail = run->status.ok() ? "the run completed " + std::to_string(run->report.steps) + " steps"
                                  : run->status.message();
      break;
    }
    case ScenarioCheckKind::kLossCase: {
      const CheckCase& c = check.loss_case;
      const std::string split = JoinText(c.split, ", ", [](std::int64_t s) { return std::to_string(s); });
      v.label = "loss code '" + check.code + "' on " + std::to_string(c.replicas) + " replicas, batch " +
                std::to_string(c.batch) + " split [" + split + "]";
      v.expected = check.expect_pass ? "PASS" : "FAIL";
      const std::string counterexample = EvaluateLossScalingCase(*BuiltinLossCode(check.code), c, true);
      v.passed = counterexample.empty();
      v.got = v.passed ? "PASS" : "FAIL";
      v.detail = v.passed ? "every example weighs w_i / " + std::to_string(c.global_batch) +
                                " and the gradient equals the global-batch gradient bit for bit"
                          : counterexample;
      break;
    }
    case ScenarioCheckKind::kAllReduce: {
      const AllReduceDrawing drawing = DrawAllReduce(check.replicas, check.algorithm, check.count);
      v.label = std::string(AllReduceAlgorithmName(check.algorithm)) + " all-reduce of " +
                std::to_string(check.replicas) + " replicas x " + std::to_string(check.count) + " values";
      v.expected = check.expect_pass ? "PASS" : "FAIL";
      v.passed = drawing.correct;
      v.got = v.passed ? "PASS" : "FAIL";
      v.numbers = {{"phases", drawing.phases}, {"messages", static_cast<double>(drawing.messages)}};
      v.detail = std::to_string(drawing.phases) + " phases, " + std::to_string(drawing.messages) +
                 " messages; every replica ends with the sum:\n" + drawing.text;
      break;
    }
    case ScenarioCheckKind::kMeanMetric: {
      v.label = "a Mean metric over the replicas' scaled losses reads the true mean";
      v.expected = check.expect_pass ? "PASS" : "FAIL";
      // In float32, as TF computes them: each replica's compute_average_loss, their
      // SUM, and a Keras Mean metric fed the scaled losses.
      float total = 0, scaled_sum = 0;
      std::int64_t count = 0;
      std::string scaled;
      std::vector<float> replica_losses;
      for (const auto& replica : check.replica_losses) {
        float sum = 0;
        for (const double l : replica) sum += static_cast<float>(l), ++count;
        total += sum;
        replica_losses.push_back(DivNoNan(sum, static_cast<float>(check.global_batch)));
        scaled_sum += replica_losses.back();
        scaled += (scaled.empty() ? "" : ", ") + Number(replica_losses.back());
      }
      const float true_mean = total / static_cast<float>(count);
      const float mean_metric = MeanOverReplicas(replica_losses);
      v.passed = mean_metric == true_mean;
      v.numbers = {{"sum_reduced", scaled_sum}, {"mean_metric", mean_metric}, {"true_mean", true_mean}};
      v.got = v.passed ? "PASS" : "FAIL";
      v.detail = "scaled per-replica losses " + scaled + ": SUM-reduced " + Number(scaled_sum) + " (the true mean " +
                 Number(true_mean) + "), a Mean metric over them reads " + Number(mean_metric);
      break;
    }
  }
  if (!check.label.empty()) v.label = check.label;
  v.as_expected = v.passed == check.expect_pass;
  return v;
}

}  // namespace

double RunResult::Value(const std::string& name) const {
  for (const auto& [key, value] : values)
    if (key == name) return value;
  return std::numeric_limits<double>::quiet_NaN();
}

StatusOr<std::map<std::string, std::string>> CheckpointDirectories(const Scenario& scenario, const std::string& work) {
  std::map<std::string, std::string> directories;
  for (const auto& run : scenario.runs) {
    if (run.resume_from.empty()) continue;
    for (const std::string* name : {&run.resume_from, &run.name}) {
      StatusOr<std::string> directory = RunDirectory(work, *name);
      if (!directory.ok()) return directory.status().WithContext(scenario.path);
      directories[*name] = *directory;
    }
  }
  return directories;
}

StatusOr<ScenarioResult> RunScenario(const Scenario& scenario, const ScenarioRunOptions& options) {
  ScenarioResult result;
  result.scenario = &scenario;
  DataCache data(options.datasets_root);
  // Checkpoint directories, only for runs that another run resumes from (or that
  // resume): the names are checked before anything is created.
  DTLAB_ASSIGN_OR_RETURN(const auto placeholders, CheckpointDirectories(scenario, "WORK"));
  std::map<std::string, std::string> checkpointed;
  std::filesystem::path work;
  struct Cleanup {
    std::filesystem::path* dir;
    ~Cleanup() {
      std::error_code ec;
      if (!dir->empty()) std::filesystem::remove_all(*dir, ec);
    }
  } cleanup{&work};
  if (!placeholders.empty()) {
    std::error_code ec;  // TMPDIR may name no directory: the error_code overload, and /tmp then
    std::filesystem::path temp = std::filesystem::temp_directory_path(ec);
    if (ec) temp = "/tmp";
    std::string pattern = (temp / "dtlab-scenario-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
      return Status::IOError("cannot create a temporary directory for checkpoints in " + temp.string() + ": " +
                             std::strerror(errno) + " (set TMPDIR to a writable directory)");
    work = pattern;
    DTLAB_ASSIGN_OR_RETURN(checkpointed, CheckpointDirectories(scenario, work.string()));
  }

  for (std::size_t i = 0; i < scenario.runs.size(); ++i) {
    const ScenarioRun& run = scenario.runs[i];
    if (options.observer) options.observer->OnRunStart(run, i, scenario.runs.size());
    RunResult r;
    r.name = run.name;
    r.run = &run;
    DTLAB_ASSIGN_OR_RETURN(const TrainTestData* d, data.Get(run.data));
    TrainConfig config = run.config;
    if (checkpointed.count(run.name)) {
      config.checkpoint_dir = checkpointed.at(run.name);
      config.max_to_keep = 0;
      if (!run.resume_from.empty()) {
        std::error_code ec;
        std::filesystem::copy(checkpointed.at(run.resume_from), config.checkpoint_dir,
                              std::filesystem::copy_options::recursive, ec);
        if (ec) {
          std::string why = "cannot copy the checkpoint of run '" + run.resume_from + "': ";
          const auto from = std::find_if(result.runs.begin(), result.runs.end(),
                                         [&](const RunResult& done) { return done.name == run.resume_from; });
          if (from != result.runs.end() && !from->status.ok())
            return from->status.WithContext(why.append("it saved none"));
          return Status::IOError(why.append(ec.message()));
        }
      }
    }
    if (i == 0) config.trace_path = options.trace_path;
    if (options.adjust_config) options.adjust_config(config);
    config.stop_request = options.stop_request;
    Recorder recorder(run, options.observer, r.steps, options.record_digests);
    auto report = Train(config, *d, &recorder);
    if (report.ok() && report->stopped_by != 0) {  // a graceful stop: no more runs, no checks
      result.stopped_by = report->stopped_by;
      r.report = std::move(report).value();
      result.runs.push_back(std::move(r));
      return result;
    }
    if (report.ok()) {
      r.report = std::move(report).value();
      ComputeValues(r, recorder);
    } else if (report.status().code() == Status::Code::kInvalidArgument ||
               report.status().code() == Status::Code::kRuntime) {
      r.status = report.status();
      // The settings are known even when the run was refused or stopped, so a
      // description that quotes them still reads right.
      r.values = {{"replicas", config.cluster.replicas},
                  {"global_batch", static_cast<double>(config.global_batch_size())}};
    } else {
      return report.status();
    }
    result.runs.push_back(std::move(r));
  }
  for (const auto& check : scenario.checks) {
    result.verdicts.push_back(Evaluate(check, result.runs));
    result.all_as_expected &= result.verdicts.back().as_expected;
  }
  // A run that stopped without a check expecting it is an error of its own.
  for (const auto& r : result.runs) {
    if (r.status.ok()) continue;
    bool expected = false;
    for (const auto& check : scenario.checks)
      expected |= (check.kind == ScenarioCheckKind::kRefused || check.kind == ScenarioCheckKind::kFault) &&
                  check.runs.front() == r.name;
    if (!expected && result.unexpected.ok()) result.unexpected = r.status.WithContext("run '" + r.name + "'");
  }
  return result;
}

}  // namespace dtlab
