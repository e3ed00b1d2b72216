// dtlab train: one run built from flags (the run option table, scenarios/run_options.h)
// and trained with the tutorial's per-epoch report.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <thread>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/console_observer.h"
#include "cli/graceful_stop.h"
#include "cli/run_flags.h"
#include "cli/terminal.h"
#include "scenarios/replay.h"
#include "scenarios/scenario_writer.h"
#include "cli/mpi_launch.h"
#include "core/model.h"
#include "core/text.h"
#include "scenarios/text_table.h"
#include "sim/engines/strategy.h"
#include "sim/comm/tf_config.h"
#include "sim/training/trainer.h"
#ifdef DTLAB_WITH_MPI
#include "sim/comm/mpi_group.h"
#endif

namespace dtlab::cli {
namespace {

namespace po = boost::program_options;

nlohmann::json ResumeToJson(const ResumeReport& r) {
  nlohmann::json changes = nlohmann::json::array();
  for (const auto& c : r.changes)
    changes.push_back({{"setting", c.setting}, {"checkpoint", c.checkpoint}, {"run", c.run}});
  return {{"checkpoint", r.checkpoint},
          {"step", r.step},
          {"epoch", r.epoch},
          {"model_variables", r.model_variables},
          {"optimizer_slots", r.optimizer_slots},
          {"optimizer_slot_variables", r.optimizer_slot_variables},
          {"optimizer_iterations", r.optimizer_iterations},
          {"changes", std::move(changes)},
          {"layout_recorded", r.layout_recorded},
          {"data_order_changed", r.data_order_changed},
          {"position",
           {{"checkpoint_global_batch", r.checkpoint_global_batch},
            {"checkpoint_step_in_epoch", r.checkpoint_step_in_epoch},
            {"global_batch", r.global_batch},
            {"step_in_epoch", r.position.step_in_epoch},
            {"examples_consumed", r.position.examples_consumed},
            {"examples_skipped", r.position.examples_skipped},
            {"epoch_examples", r.epoch_examples}}}};
}

struct StalenessSummary {
  std::int64_t max = 0;
  double mean = 0;
};
StalenessSummary SummarizeStaleness(const std::vector<std::int64_t>& staleness) {
  StalenessSummary summary;
  std::int64_t sum = 0;
  for (const auto s : staleness) summary.max = std::max(summary.max, s), sum += s;
  if (!staleness.empty()) summary.mean = static_cast<double>(sum) / static_cast<double>(staleness.size());
  return summary;
}

nlohmann::json ToJson(const TrainConfig& config, const TrainReport& report) {
  nlohmann::json epochs = nlohmann::json::array();
  for (const auto& e : report.epochs)
    epochs.push_back({{"epoch", e.epoch},
                      {"learning_rate", e.learning_rate},
                      {"train_loss", e.train_loss},
                      {"train_accuracy", e.train_accuracy},
                      {"test_loss", e.test_loss},
                      {"test_accuracy", e.test_accuracy},
                      {"seconds", e.seconds},
                      {"steps", e.steps}});
  if (config.cluster.precision.dynamic_loss_scale)
    for (std::size_t i = 0; i < report.epochs.size(); ++i) {
      epochs[i]["loss_scale"] = report.epochs[i].loss_scale;
      epochs[i]["skipped_steps"] = report.epochs[i].skipped_steps;
    }
  nlohmann::json out = {
      {"model", config.model},
      {"dataset", config.dataset},
      {"optimizer", config.optimizer},
      {"seed", config.seed},
      {"batch_per_replica", config.batch_per_replica},
      {"strategy", StrategyName(config.cluster.strategy)},
      {"replicas", config.cluster.replicas},
      {"workers", config.cluster.workers},
      {"global_batch_size", config.global_batch_size()},
      {"all_reduce", AllReduceAlgorithmName(config.cluster.all_reduce)},
      {"convention", ConventionName(config.cluster.convention)},
      {"loss_denominator", LossDenominatorName(config.cluster.denominator)},
      {"math", MathModeName(config.cluster.math)},
      {"exact_all_reduce", ExactAllReduceName(config.cluster.exact_all_reduce)},
      {"precision", PrecisionName(config.cluster.precision.compute)},
      {"regularization_split", RegularizationSplitName(config.cluster.split())},
      {"input", report.input_description},
      {"simulated_seconds", report.simulated_seconds},
      {"simulated_collective_seconds", report.simulated_collective_seconds},
      {"folded_reduction", report.folded_reduction},
      {"estimated_peak_bytes", report.estimated_peak_bytes},
      {"peak_resident_bytes", report.peak_resident_bytes},
      {"collective_bytes", report.collective_bytes},
      {"epochs", epochs},
      {"steps", report.steps},
      {"seconds", report.seconds},
      {"images_per_second", report.images_per_second},
      {"final_test_accuracy", report.final_test_accuracy},
      {"final_test_loss", report.final_test_loss},
  };
  char digest[17];
  std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(report.weights_digest));
  out["weights_digest"] = digest;  // FNV-1a of the final variables: equal digests, equal bits
  if (config.cluster.precision.dynamic_loss_scale) out["skipped_steps"] = report.skipped_steps;
  // Gradient accumulation: "steps" counts optimizer steps, each of these many
  // micro-batches of global_batch_size (absent without accumulation).
  if (config.cluster.accumulation.on()) {
    out["accumulation_steps"] = config.cluster.accumulation.steps;
    out["accumulation"] = AccumulationRuleName(config.cluster.accumulation.rule);
    out["step_batch_size"] = config.step_batch_size();
  }
  if (report.resumed_from_step >= 0) out["resumed_from_step"] = report.resumed_from_step;
  if (report.resume) out["resume"] = ResumeToJson(*report.resume);
  if (!report.staleness.empty()) {
    const StalenessSummary staleness = SummarizeStaleness(report.staleness);
    out["parameter_servers"] = config.parameter_servers;
    out["staleness"] = {{"per_update", report.staleness}, {"max", staleness.max}, {"mean", staleness.mean}};
  }
  if (report.reference_check) {
    const ReferenceCheckSummary& c = *report.reference_check;
    out["reference_check"] = {{"steps_checked", c.steps_checked},
                              {"steps_failed", c.steps_failed},
                              {"max_abs_diff", c.max_abs_diff},
                              {"max_ulp", c.max_ulp},
                              {"max_bound_fraction", c.max_bound_fraction},
                              {"within_bound", c.within_bound},
                              {"per_example_values_identical", c.per_example_values_identical}};
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& v : c.per_step) {
      nlohmann::json step = {{"step", v.step}, {"max_ulp", v.max_ulp}};
      step[c.exact ? "bitwise_equal" : "within_bound"] = v.passed;
      steps.push_back(std::move(step));
    }
    out["reference_check"]["per_step"] = std::move(steps);
    out["reference_check"]["math"] = c.exact ? "exact" : "fast";
    if (c.exact) out["reference_check"]["bitwise_equal"] = c.within_bound;
    if (c.first_failed_step >= 0) {
      out["reference_check"]["first_failed_step"] = c.first_failed_step;
      out["reference_check"]["first_failure"] = c.first_failure;
    }
  }
  if (!report.last_checkpoint.empty()) out["last_checkpoint"] = report.last_checkpoint;
  return out;
}

// A run stopped by SIGINT or SIGTERM (cli/graceful_stop.h): where it stopped and
// how to go on, on `human` (null on the ranks that do not report); the exit code.
int ReportStop(const TrainConfig& config, const TrainReport& report, std::FILE* human, bool json) {
  if (human != nullptr) {
    const std::string saved = !report.last_checkpoint.empty() ? report.last_checkpoint
                              : !config.backup_dir.empty()    ? "the backup in " + config.backup_dir
                                                              : "";
    if (!saved.empty())
      std::fprintf(human, "stopped at step %lld; rerun the same command to resume (saved %s)\n",
                   static_cast<long long>(report.steps), EscapeControl(saved).c_str());
    else
      std::fprintf(human,
                   "stopped at step %lld; nothing was saved to resume from (give --checkpoint-dir to save "
                   "where a run stops)\n",
                   static_cast<long long>(report.steps));
    std::fflush(human);
    if (json) {
      nlohmann::json out = ToJson(config, report);
      out["stopped"] = {{"signal", report.stopped_by}, {"step", report.steps}};
      PrintJson(out);
    }
  }
  return ExitCodeForStop(report.stopped_by);
}

// --dry-run: the estimate on `human` (and as JSON); exit 0, or 2 when the run
// would not fit (the refusal on stderr, as a real run would print it).
int ReportDryRun(const TrainConfig& config, const DryRunReport& dry, std::FILE* human, bool json) {
  const MemoryEstimate& m = dry.memory;
  const bool time_known = dry.time_not_estimated.empty();
  if (human != nullptr) {
    std::fprintf(human, "Dry run: %s, %d replica%s, global batch %lld, %s mode, %lld steps\n",
                 std::string(StrategyName(config.cluster.strategy)).c_str(), config.cluster.replicas,
                 config.cluster.replicas == 1 ? "" : "s", static_cast<long long>(config.global_batch_size()),
                 std::string(MathModeName(config.cluster.math)).c_str(), static_cast<long long>(dry.steps));
    std::fprintf(human, "Memory, estimated peak %s:\n", BytesText(dry.peak_bytes).c_str());
    std::fprintf(human, "  already held (data set, code)   %s\n", BytesText(dry.resident_bytes).c_str());
    // On MPI ranks, each rank's estimate is of its own replicas (--replicas-per-worker).
    const std::string share =
        config.worker_group != nullptr ? ", this rank's " + std::to_string(config.cluster.replicas_per_worker()) : "";
    std::fprintf(human, "  replicas                        %s (%s each%s)\n", BytesText(m.replicas_bytes).c_str(),
                 BytesText(m.per_replica_bytes).c_str(), share.c_str());
    std::fprintf(human, "  a step's batch and workspaces   %s\n", BytesText(m.batch_bytes).c_str());
    if (m.folded) {
      std::fprintf(human, "  one step's message log          none: gradients folded above %d replicas\n",
                   config.cluster.fold_above);
      if (m.message_log_bytes > 0)  // the cost model prices the named collective once, from its schedule
        std::fprintf(human, "  the collective's priced record  %s\n", BytesText(m.message_log_bytes).c_str());
    } else {
      std::fprintf(human, "  one step's message log          %s\n", BytesText(m.message_log_bytes).c_str());
    }
    if (dry.available)
      std::fprintf(human, "  available                       %s (%s); at most %d replica%s%s fit\n",
                   BytesText(dry.available->bytes).c_str(), dry.available->source.c_str(), dry.largest_replicas,
                   dry.largest_replicas == 1 ? "" : "s", config.worker_group != nullptr ? " a rank" : "");
    if (time_known)
      std::fprintf(human,
                   "Simulated time (cost model): %.4g s per step (compute %.4g s, collectives %.4g s moving %s), "
                   "%.4g s for %lld steps\n",
                   dry.step.compute_seconds + dry.step.collective_seconds, dry.step.compute_seconds,
                   dry.step.collective_seconds, BytesText(static_cast<double>(dry.step.collective_bytes)).c_str(),
                   dry.simulated_seconds, static_cast<long long>(dry.steps));
    else
      std::fprintf(human, "Simulated time: not estimated (%s)\n", dry.time_not_estimated.c_str());
    std::fprintf(human, "%s\n", dry.fits.ok() ? "The run fits; nothing was trained." : "The run would NOT fit.");
    std::fflush(human);
    if (json) {
      nlohmann::json out = {{"dry_run", true},
                            {"strategy", StrategyName(config.cluster.strategy)},
                            {"replicas", config.cluster.replicas},
                            {"global_batch", config.global_batch_size()},
                            {"math", MathModeName(config.cluster.math)},
                            {"steps", dry.steps},
                            {"peak_bytes", dry.peak_bytes},
                            {"resident_bytes", dry.resident_bytes},
                            {"replicas_bytes", m.replicas_bytes},
                            {"per_replica_bytes", m.per_replica_bytes},
                            {"batch_bytes", m.batch_bytes},
                            {"message_log_bytes", m.message_log_bytes},
                            {"folded_reduction", m.folded},
                            {"fits", dry.fits.ok()}};
      if (dry.available) {
        out["available_bytes"] = dry.available->bytes;
        out["available_source"] = dry.available->source;
        out["largest_replicas"] = dry.largest_replicas;
        if (config.worker_group != nullptr) out["ranks_on_machine"] = dry.available->ranks_on_machine;
      }
      if (time_known) {
        out["simulated_seconds"] = dry.simulated_seconds;
        out["step_compute_seconds"] = dry.step.compute_seconds;
        out["step_collective_seconds"] = dry.step.collective_seconds;
        out["step_collective_bytes"] = dry.step.collective_bytes;
      } else {
        out["time_not_estimated"] = dry.time_not_estimated;
      }
      PrintJson(out);
    }
  }
  if (!dry.fits.ok()) {
    std::fprintf(stderr, "dtlab train: %s\n", dry.fits.message().c_str());
    return 2;
  }
  return 0;
}

constexpr const char* kTrainExamples =
    "  Train the tutorial's model on one device for one epoch:\n"
    "    dtlab train --epochs 1\n"
    "  Train on 4 replicas and hold every step against one device on the global batch:\n"
    "    dtlab train --replicas 4 --steps 100 --check-reference\n"
    "  The pitfall: each replica divides by its own batch (gradients 4x too large):\n"
    "    dtlab train --replicas 4 --steps 20 --loss-denominator per-replica --check-reference\n"
    "  Bit-for-bit equal to one device, on 3 replicas:\n"
    "    dtlab train --replicas 3 --steps 50 --math exact --check-reference\n"
    "  Checkpoints every 100 steps; run the same command again to resume:\n"
    "    dtlab train --replicas 4 --checkpoint-dir ckpt --checkpoint-every 100\n"
    "  Kill replica 2 at step 5 and see the run stop with exit 3:\n"
    "    dtlab train --replicas 4 --steps 10 --inject-fault die:replica=2,step=5\n"
    "  What 1024 replicas in exact mode would need, memory and simulated time, without training:\n"
    "    dtlab train --replicas 1024 --batch-per-replica 1 --math exact --dry-run\n"
    "  Save the run as a scenario file, then run it:\n"
    "    dtlab train --replicas 8 --steps 30 --save-scenario my.toml && dtlab run my.toml\n";

std::string ModelList() {
  std::string text = "Models:\n";
  for (const auto& m : ListModels()) text += "  " + m.name + ": " + m.description + "\n";
  return text;
}

// A multi-worker run under mpirun: this process is one rank (docs/mpi.md).
struct MpiRun {
  int rank = 0, size = 1;
#ifdef DTLAB_WITH_MPI
  std::unique_ptr<MpiWorkerGroup> group;
#endif
};

#ifdef DTLAB_WITH_MPI
// FNV-1a of the arguments: every rank must be started with the same ones.
std::uint64_t ArgumentsDigest(const std::vector<std::string>& args) {
  std::uint64_t digest = 14695981039346656037ull;
  for (const std::string& arg : args)
    for (const char c : arg + '\0') digest = (digest ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return digest;
}

Status Invalid(const std::string& message) { return Status::InvalidArgument(message); }

// Joins the MPI world and fits the config to it: W ranks are W workers of
// replicas_per_worker replicas each. Checks TF_CONFIG, when set, against the
// world, and that every rank was started with the same arguments.
Status JoinMpiWorld(const std::vector<std::string>& args, std::int32_t replicas_per_worker, bool replicas_given,
                    bool workers_given, bool all_reduce_given, TrainConfig& config, MpiRun& run) {
  DTLAB_ASSIGN_OR_RETURN(run.group,
                         MpiWorkerGroup::Create(nullptr, nullptr, config.cluster.collective_timeout_seconds));
  run.rank = run.group->rank();
  run.size = run.group->size();
  const bool ps = config.cluster.strategy == StrategyKind::kParameterServer;
  if (const char* tf_config = std::getenv("TF_CONFIG"); tf_config != nullptr && *tf_config != '\0') {
    auto parsed = ParseTfConfig(tf_config);
    if (!parsed.ok()) return Status::InvalidArgument("TF_CONFIG: " + parsed.status().message());
    DTLAB_RETURN_IF_ERROR(ps ? CheckParameterServerTfConfigAgainstWorld(*parsed, run.size, run.rank)
                             : CheckTfConfigAgainstWorld(*parsed, run.size, run.rank));
  }
  // The same arguments everywhere, or the ranks would compute different steps.
  const std::uint64_t digest = ArgumentsDigest(args);
  DTLAB_ASSIGN_OR_RETURN(const std::vector<std::uint64_t> digests,
                         run.group->AllGatherOne(digest,
                                                 "the start-up handshake (a peer that never answers is unreachable "
                                                 "or was not started)",
                                                 0));
  for (std::size_t r = 0; r < digests.size(); ++r)
    if (digests[r] != digests[0])
      return Status::InvalidArgument("rank " + std::to_string(r) +
                                     " was started with other arguments than rank 0; "
                                     "every rank must run the same dtlab train command");
  if (ps) {
    // Rank 0 the chief (coordinator), then the workers, then the parameter servers.
    const std::int32_t workers = run.size - 1 - config.parameter_servers;
    if (workers < 1)
      return Invalid(
          "parameter_server across MPI ranks needs 1 chief + at least 1 worker + " +
          std::to_string(config.parameter_servers) + " parameter server(s) (--parameter-servers) = at least " +
          std::to_string(2 + config.parameter_servers) + " ranks; mpirun started " + std::to_string(run.size));
    if (workers_given && config.cluster.workers != workers)
      return Invalid("--workers " + std::to_string(config.cluster.workers) + " but " + std::to_string(run.size) +
                     " ranks = 1 chief + " + std::to_string(workers) + " workers + " +
                     std::to_string(config.parameter_servers) + " parameter servers (drop --workers)");
    config.cluster.workers = config.cluster.replicas = workers;
    config.worker_group = run.group.get();
    return Status::Ok();
  }
  if (config.cluster.strategy != StrategyKind::kMultiWorkerMirrored)
    return Status::InvalidArgument("dtlab train runs as one worker per MPI rank (" + std::to_string(run.size) +
                                   " ranks here) with --strategy multi_worker_mirrored (or parameter_server); got "
                                   "--strategy " +
                                   std::string(StrategyName(config.cluster.strategy)));
  if (replicas_per_worker < 1)
    return Status::InvalidArgument("--replicas-per-worker must be at least 1, got " +
                                   std::to_string(replicas_per_worker));
  if (workers_given && config.cluster.workers != run.size)
    return Status::InvalidArgument("--workers " + std::to_string(config.cluster.workers) + " but mpirun started " +
                                   std::to_string(run.size) +
                                   " ranks: each rank is one worker (drop --workers, or "
                                   "run mpirun -np " +
                                   std::to_string(config.cluster.workers) + ")");
  const std::int32_t replicas = run.size * replicas_per_worker;
  if (replicas_given && config.cluster.replicas != replicas)
    return Status::InvalidArgument("--replicas " + std::to_string(config.cluster.replicas) + " but " +
                                   std::to_string(run.size) + " ranks x --replicas-per-worker " +
                                   std::to_string(replicas_per_worker) + " = " + std::to_string(replicas) +
                                   " (drop --replicas)");
  config.cluster.workers = run.size;
  config.cluster.replicas = replicas;
  // Within a worker, then across workers, then back (the hierarchical all-reduce).
  if (!all_reduce_given) config.cluster.all_reduce = AllReduceAlgorithm::kHierarchical;
  config.worker_group = run.group.get();
  return Status::Ok();
}
#endif

}  // namespace

int TrainCommand(const std::vector<std::string>& args) {
  // Every option is a run option (scenarios/run_options.h): the flags fill the same
  // RunSettings a scenario file does.
  po::options_description options("Options");
  std::string save_scenario;
  po::options_description save("Outputs");
  save.add_options()("save-scenario", po::value(&save_scenario),
                     "write this run as a scenario file (dtlab run FILE trains the same run) and exit without "
                     "training; the options a scenario cannot hold are refused (docs/scenarios.md)");
  std::string color_flag;
  AddColorFlag(save, &color_flag);
  AddRunFlags(options, &save);
  po::variables_map values;
  const int parsed =
      ParseOptions("train", "[options]",
                   "Trains a model as the tf.distribute custom-training tutorial does: loss =\n"
                   "compute_average_loss(per-example cross-entropy, global batch) + scaled L2 regularization,\n"
                   "then prints 'Epoch N, Loss, Accuracy, Test Loss, Test Accuracy' per epoch. On one device,\n"
                   "on --replicas simulated replicas (--strategy), or on several processes and machines:\n"
                   "  mpirun -np W dtlab train --strategy multi_worker_mirrored --replicas-per-worker R\n"
                   "  mpirun -np 1+W+P dtlab train --strategy parameter_server --parameter-servers P\n"
                   "(docs/mpi.md).\n"
                   "Ctrl-C (SIGINT) or SIGTERM stops after the current step, saves a checkpoint in --checkpoint-dir\n"
                   "and exits 130 (143); rerun the same command to resume. A second Ctrl-C stops at once.\n\n" +
                       ModelList(),
                   options, args, values, nullptr, nullptr, kTrainExamples);
  if (parsed >= 0) return parsed;
  RunSettings settings;
  const Status applied = ApplyRunFlags(values, settings);
  TrainConfig& config = settings.config;
  // Under mpirun each rank supervises a worker process (cli/mpi_launch.h): fork
  // before any thread exists.
  if (values.count("save-scenario") && save_scenario.empty()) {
    std::fputs("dtlab train: --save-scenario needs the path of the file to write\n", stderr);
    return 2;
  }
  const bool mpi = LaunchedByMpi();
  if (mpi && !save_scenario.empty()) {
    std::fputs("dtlab train: --save-scenario saves a run of one process; run it without mpirun\n", stderr);
    return 2;
  }
  if (mpi) {
#ifndef DTLAB_WITH_MPI
    std::fprintf(stderr,
                 "dtlab train: started by an MPI launcher, but this dtlab was built without MPI "
                 "(install libopenmpi-dev and rebuild; docs/mpi.md)\n");
    return 2;
#else
    if (const int code = SuperviseWorker(); code >= 0) return code;
    // Several ranks on one machine share its cores.
    if (settings.threads == 0)
      settings.threads = static_cast<int>(
          std::max(1u, std::thread::hardware_concurrency() / static_cast<unsigned>(std::max(1, LauncherLocalSize()))));
#endif
  }
  if (!ApplyThreadCount(settings.threads)) return 2;
  if (!applied.ok()) return ReportError("train", applied);
  const StatusOr<bool> color = ColorFromFlag(color_flag);
  if (!color.ok()) return ReportError("train", color.status());
  ApplyDependentDefaults(settings, OptionSource::kCommandLine);
  MpiRun run;
  std::string command = "train";
#ifdef DTLAB_WITH_MPI
  if (mpi) {
    command = "train (rank " + std::to_string(LauncherRank()) + ")";
    if (Status status = JoinMpiWorld(args, settings.replicas_per_worker, settings.Given("replicas"),
                                     settings.Given("workers"), settings.Given("all-reduce"), config, run);
        !status.ok())
      return ReportError(command, status);
  }
#endif
  if (!mpi && settings.Given("replicas-per-worker"))
    return ReportError("train", Status::InvalidArgument("--replicas-per-worker is for runs under mpirun (docs/mpi.md); "
                                                        "in one process use --workers and --replicas"));
  if (Status status = config.Validate(); !status.ok()) return ReportError(command, status);
  if (!save_scenario.empty()) {  // a dry run: the run as a file, nothing trained
    if (Status status = SaveScenarioFile(settings, save_scenario); !status.ok()) return ReportError(command, status);
    if (settings.json)
      PrintJson({{"scenario_file", save_scenario}});
    else
      std::printf("Saved the scenario file %s: dtlab run %s trains this run\n", EscapeControl(save_scenario).c_str(),
                  EscapeControl(save_scenario).c_str());
    return 0;
  }
  if (settings.backend != "cpu" || !settings.devices.empty() || settings.streams != 0) {
    auto devices = ParseDeviceList(settings.devices);
    if (!devices.ok()) return ReportError(command, devices.status());
    auto factory = ComputeBackendFactory(settings.backend, *devices, settings.streams, config.cluster.replicas);
    if (!factory.ok()) return ReportError(command, factory.status());
    config.make_compute_backend = *factory;
  }

  const bool json = settings.json;
  auto data = LoadMnistStyleDataset(config.dataset);
  if (!data.ok()) return ReportError(command, data.status());
  // Only the chief (rank 0) reports; the other ranks print errors only.
  std::FILE* human = json ? stderr : stdout;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> quiet(nullptr, std::fclose);
  if (run.rank != 0) {
    quiet.reset(std::fopen("/dev/null", "w"));
    if (quiet) human = quiet.get();
  }
  // On a terminal (or with COLUMNS set) lines wider than it wrap at spaces. Under
  // mpirun stdout is Open MPI's pseudo-terminal, which relays to wherever mpirun's
  // output goes, not the user's terminal: COLUMNS alone decides there.
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> fitted(nullptr, std::fclose);
  if (human == stdout && (!mpi || std::getenv("COLUMNS") != nullptr) && FitWidth() > 0) {
    fitted.reset(OpenFittedStream(stdout, FitWidth()));
    if (fitted) human = fitted.get();
  }
  const auto verdict = [&](bool pass) {
    return Paint(pass ? "PASS" : "FAIL", pass ? Tone::kPass : Tone::kFail, *color);
  };
  // The progress counts the run's steps when --steps ends it before its epochs do.
  TrainConfig all_epochs = config;
  all_epochs.max_steps = -1;
  const std::int64_t last_step = LastStep(config, data->train.count);
  ConsoleObserver observer(human, run.rank == 0 && !settings.no_progress && isatty(STDERR_FILENO), config.epochs,
                           last_step < LastStep(all_epochs, data->train.count) ? last_step : 0);
  observer.set_accumulation(config.cluster.accumulation.steps, config.global_batch_size());
  config.stop_request = InstallGracefulStop(isatty(STDERR_FILENO));
  auto report = Train(config, *data, &observer);
  if (!report.ok()) return ReportError(command, report.status());
#ifdef DTLAB_WITH_MPI
  if (run.group) run.group->Finish();
#endif
  if (report->dry_run) return ReportDryRun(config, *report->dry_run, run.rank == 0 ? human : nullptr, json);
  if (report->stopped_by != 0) return ReportStop(config, *report, run.rank == 0 ? human : nullptr, json);
  if (run.rank != 0) return report->reference_check && !report->reference_check->within_bound ? 1 : 0;
  const bool async = config.cluster.strategy == StrategyKind::kParameterServer;
  if (mpi && async)
    std::fprintf(human,
                 "parameter_server on MPI: 1 chief + %d workers + %d parameter servers (%d ranks); weights digest "
                 "%016llx\n",
                 config.cluster.workers, config.parameter_servers, run.size,
                 static_cast<unsigned long long>(report->weights_digest));
  else if (mpi)
    std::fprintf(human, "multi_worker_mirrored on MPI: %d ranks x %d replicas, %s all-reduce; weights digest %016llx\n",
                 run.size, config.cluster.replicas / std::max(1, run.size),
                 std::string(AllReduceAlgorithmName(config.cluster.all_reduce)).c_str(),
                 static_cast<unsigned long long>(report->weights_digest));
  if (json) {
    nlohmann::json out = ToJson(config, *report);
    out["backend"] = settings.backend;
    PrintJson(out);
  } else {
    std::fprintf(human, "Trained %lld steps in %.1f s (%.0f images/s); final test accuracy %.2f%%\n",
                 static_cast<long long>(report->steps), report->seconds, report->images_per_second,
                 report->final_test_accuracy * 100.0f);
    if (!report->staleness.empty()) {
      const StalenessSummary staleness = SummarizeStaleness(report->staleness);
      std::fprintf(human,
                   "parameter_server, %d workers, %d parameter servers: %zu updates, staleness mean %.2f, max %lld",
                   config.cluster.workers, config.parameter_servers, report->staleness.size(), staleness.mean,
                   static_cast<long long>(staleness.max));
      if (mpi)
        std::fprintf(human, " (measured)\n");
      else
        std::fprintf(human, "; simulated time %.3f s\n", report->simulated_seconds);
    } else if (config.cluster.replicas > 1) {
      std::fprintf(human, "%s, %d replicas: simulated time %.3f s, of which collectives %.3f s (%s)\n",
                   std::string(StrategyName(config.cluster.strategy)).c_str(), config.cluster.replicas,
                   report->simulated_seconds, report->simulated_collective_seconds,
                   std::string(AllReduceAlgorithmName(config.cluster.all_reduce)).c_str());
      if (report->folded_reduction)
        std::fprintf(human,
                     "Gradients summed by the folded reduction above %d replicas (docs/cluster.md); the all-reduce is "
                     "%s\n",
                     config.cluster.fold_above,
                     report->collectives_not_simulated.empty()
                         ? "priced from its schedule"
                         : ("not priced: " + report->collectives_not_simulated).c_str());
    }
  }
  if (report->reference_check) {
    const ReferenceCheckSummary& c = *report->reference_check;
    if (c.exact && c.within_bound)
      std::fprintf(human, "Reference check (exact): %s, %lld of %lld steps bitwise equal to one device\n",
                   verdict(true).c_str(), static_cast<long long>(c.steps_checked),
                   static_cast<long long>(c.steps_checked));
    else if (c.exact)
      std::fprintf(human,
                   "Reference check (exact): %s, %lld of %lld steps not bitwise equal (max %lld ULP); "
                   "first at step %lld: %s\n",
                   verdict(false).c_str(), static_cast<long long>(c.steps_failed),
                   static_cast<long long>(c.steps_checked), static_cast<long long>(c.max_ulp),
                   static_cast<long long>(c.first_failed_step), c.first_failure.c_str());
    else if (c.within_bound)
      std::fprintf(human,
                   "Reference check: %s, %lld of %lld steps within the floating-point bound "
                   "(max %lld ULP, %.2g of the bound)\n",
                   verdict(true).c_str(), static_cast<long long>(c.steps_checked),
                   static_cast<long long>(c.steps_checked), static_cast<long long>(c.max_ulp), c.max_bound_fraction);
    else
      std::fprintf(human, "Reference check: %s, %lld of %lld steps outside the bound; first at step %lld: %s\n",
                   verdict(false).c_str(), static_cast<long long>(c.steps_failed),
                   static_cast<long long>(c.steps_checked), static_cast<long long>(c.first_failed_step),
                   c.first_failure.c_str());
    if (!c.within_bound) return 1;
  }
  return 0;
}

}  // namespace dtlab::cli
