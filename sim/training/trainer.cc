#include "sim/training/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <span>
#include <sstream>
#include <vector>

#include <tbb/task_arena.h>

#include "core/batch.h"
#include "core/checked_number.h"
#include "core/checkpoint_manager.h"
#include "core/dataset.h"
#include "core/file_io.h"
#include "core/training_state.h"
#include "sim/compute/batch_runner.h"
#include "sim/training/accumulation_run.h"
#include "sim/training/checkpointing.h"
#include "sim/training/evaluation.h"
#include "sim/training/memory_estimate.h"
#include "sim/engines/parameter_server.h"
#include "sim/training/run_timing.h"
#include "sim/training/step_dump.h"

namespace dtlab {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

float LearningRateFor(const TrainConfig& config, float default_rate, std::int64_t epoch) {
  float rate = config.learning_rate.value_or(default_rate);
  for (const auto& [first_epoch, value] : config.schedule)
    if (epoch >= first_epoch) rate = value;
  return rate;
}

}  // namespace

StatusOr<LearningRateSchedule> ParseLearningRateSchedule(const std::string& text) {
  if (text == "tutorial") return LearningRateSchedule{{1, 1e-3f}, {4, 1e-4f}, {8, 1e-5f}};
  LearningRateSchedule schedule;
  std::stringstream in(text);
  std::string item;
  const auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("--lr-schedule '" + text + "': " + why +
                                   " (expected EPOCH:RATE,... with increasing 1-based epochs starting at 1, "
                                   "e.g. 1:1e-3,4:1e-4,8:1e-5, or 'tutorial')");
  };
  while (std::getline(in, item, ',')) {
    const auto colon = item.find(':');
    if (colon == std::string::npos) return bad("entry '" + item + "' has no ':'");
    std::int64_t epoch = 0;
    float rate = 0;
    try {
      std::size_t used = 0;
      epoch = std::stoll(item.substr(0, colon), &used);
      if (used != colon) return bad("epoch in '" + item + "' is not an integer");
      const std::string rate_text = item.substr(colon + 1);
      rate = std::stof(rate_text, &used);
      if (used != rate_text.size()) return bad("rate in '" + item + "' is not a number");
    } catch (const std::exception&) {
      return bad("entry '" + item + "' is not EPOCH:RATE");
    }
    if (!(rate > 0) || !std::isfinite(rate)) return bad("rate in '" + item + "' must be positive");
    if (schedule.empty() ? epoch != 1 : epoch <= schedule.back().first)
      return bad("epochs must start at 1 and increase");
    schedule.emplace_back(epoch, rate);
  }
  if (schedule.empty()) return bad("empty schedule");
  return schedule;
}

Status TrainConfig::Validate() const {
  if (epochs < 1) return Status::InvalidArgument("--epochs must be at least 1, got " + std::to_string(epochs));
  if (batch_per_replica < 1)
    return Status::InvalidArgument("--batch-per-replica must be at least 1, got " + std::to_string(batch_per_replica));
  if (global_batch && *global_batch < 1)
    return Status::InvalidArgument("--global-batch must be at least 1, got " + std::to_string(*global_batch));
  // Bounded before anything multiplies it (batch x replicas, batch x example size).
  if (global_batch ? *global_batch > kMaxGlobalBatch : batch_per_replica > kMaxGlobalBatch)
    return Status::InvalidArgument(std::string(global_batch ? "--global-batch" : "--batch-per-replica") +
                                   " must be at most " + std::to_string(kMaxGlobalBatch) + ", got " +
                                   std::to_string(global_batch ? *global_batch : batch_per_replica));
  if (!global_batch && cluster.replicas >= 1) {
    const auto product = CheckedMultiply(batch_per_replica, cluster.replicas);
    if (!product || *product > kMaxGlobalBatch)
      return Status::InvalidArgument("the global batch, --batch-per-replica " + std::to_string(batch_per_replica) +
                                     " x --replicas " + std::to_string(cluster.replicas) + ", must be at most " +
                                     std::to_string(kMaxGlobalBatch) +
                                     "; use a smaller --batch-per-replica or "
                                     "fewer --replicas");
  }
  if (max_steps == 0 || max_steps < -1)
    return Status::InvalidArgument("--steps must be at least 1, got " + std::to_string(max_steps));
  if (checkpoint_every < 0)
    return Status::InvalidArgument("--checkpoint-every must be positive, got " + std::to_string(checkpoint_every));
  if (backup_every < 0)
    return Status::InvalidArgument("--backup-every must be positive, got " + std::to_string(backup_every));
  // Across MPI ranks the chief holds the parameter servers' variables only when an
  // epoch closes (sim/engines/parameter_server.h), so it cannot save after any update.
  if (cluster.strategy == StrategyKind::kParameterServer && worker_group != nullptr &&
      (checkpoint_every > 0 || (!backup_dir.empty() && backup_every > 0)))
    return Status::InvalidArgument(std::string(checkpoint_every > 0 ? "--checkpoint-every" : "--backup-every") +
                                   ": parameter_server across MPI ranks saves at the end of epochs and of a --steps "
                                   "run only (the chief gathers the servers' variables when an epoch closes); drop it");
  auto canonical = [](const std::string& directory) {  // "dir/" and "dir" are one directory
    std::error_code ec;                                // an unreadable path is compared as written
    std::filesystem::path path = std::filesystem::weakly_canonical(directory, ec);
    if (ec) path = std::filesystem::path(directory).lexically_normal();
    return path.has_filename() ? path : path.parent_path();
  };
  if (!backup_dir.empty() && !checkpoint_dir.empty() && canonical(backup_dir) == canonical(checkpoint_dir))
    return Status::InvalidArgument("--backup-dir and --checkpoint-dir are the same directory (" + backup_dir +
                                   "); the backup is deleted when training ends, so give it its own directory");
  if (max_to_keep < 0)
    return Status::InvalidArgument("--max-to-keep must be 0 (keep all) or more, got " + std::to_string(max_to_keep));
  if (dump_step >= 1 && dump_dir.empty()) return Status::InvalidArgument("--dump-step needs --dump-dir");
  if (shuffle_buffer < 0)
    return Status::InvalidArgument("--shuffle-buffer must be positive, got " + std::to_string(shuffle_buffer));
  if (chunk_size < 1) return Status::InvalidArgument("chunk size must be at least 1");
  DTLAB_RETURN_IF_ERROR(cluster.Validate());
  if (cluster.accumulation.on()) {
    const auto step_batch = CheckedMultiply(global_batch_size(), cluster.accumulation.steps);
    if (!step_batch || *step_batch > kMaxGlobalBatch)
      return Status::InvalidArgument("the optimizer step's batch, --accumulation-steps " +
                                     std::to_string(cluster.accumulation.steps) + " x the global batch " +
                                     std::to_string(global_batch_size()) + ", must be at most " +
                                     std::to_string(kMaxGlobalBatch) + "; use fewer --accumulation-steps");
  }
  if (trace_steps < 1) return Status::InvalidArgument("--trace-steps must be at least 1");
  if (cluster.strategy == StrategyKind::kParameterServer && cluster.check_reference)
    return Status::InvalidArgument(
        "--check-reference compares synchronous steps with one device; parameter_server "
        "updates are asynchronous (each is checked against a sequential replay of the "
        "same updates in tests/unit/parameter_server_test.cc)");
  if (parameter_servers < 1)
    return Status::InvalidArgument("--parameter-servers must be at least 1, got " + std::to_string(parameter_servers));
  DTLAB_RETURN_IF_ERROR(CheckFinite(straggler_spread, "--straggler-spread"));
  if (!(straggler_spread >= 0)) return Status::InvalidArgument("--straggler-spread must be 0 or more");
  DTLAB_RETURN_IF_ERROR(CheckFinite(device_flops_per_second, "--device-gflops"));
  if (!(device_flops_per_second > 0)) return Status::InvalidArgument("--device-gflops must be positive");
  if (learning_rate && !(*learning_rate > 0 && std::isfinite(*learning_rate)))
    return Status::InvalidArgument("--lr must be a positive number, got " + std::to_string(*learning_rate));
  DTLAB_RETURN_IF_ERROR(CheckFinite(momentum, "--momentum"));
  if (momentum != 0.0f && optimizer != "sgd")
    return Status::InvalidArgument("--momentum applies to the sgd optimizer only; " + optimizer +
                                   " has no momentum option (drop --momentum, or use --optimizer sgd)");
  return Status::Ok();
}

void ReferenceCheckSummary::Add(const StepCheck& check) {
  ++steps_checked;
  exact = check.exact;
  per_step.push_back({check.step, check.within_bound, check.max_ulp});
  max_abs_diff = std::max(max_abs_diff, check.max_abs_diff);
  max_bound_fraction = std::max(max_bound_fraction, check.max_bound_fraction);
  max_ulp = std::max(max_ulp, check.max_ulp);
  per_example_values_identical &= check.per_example_values_identical;
  if (check.within_bound) return;
  within_bound = false;
  ++steps_failed;
  if (first_failed_step < 0) {
    first_failed_step = check.step;
    first_failure = check.explanation;
  }
}

std::uint64_t WeightsDigest(const ParameterList<float>& variables) {
  std::uint64_t digest = 14695981039346656037ull;  // FNV-1a over the variables' bytes
  for (const auto& variable : variables)
    for (const float v : variable.span()) {
      std::uint32_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      for (int b = 0; b < 4; ++b) digest = (digest ^ ((bits >> (8 * b)) & 0xffu)) * 1099511628211ull;
    }
  return digest;
}

std::int64_t LastStep(const TrainConfig& config, std::int64_t train_examples) {
  const std::int64_t batch = std::max<std::int64_t>(config.global_batch_size(), 1);
  const std::int64_t per_epoch = config.drop_remainder ? train_examples / batch : (train_examples + batch - 1) / batch;
  const GradientAccumulation& accumulation = config.cluster.accumulation;  // per_epoch counts micro-batches then
  const std::int64_t all =
      accumulation.on() ? accumulation.StepsInEpochs(per_epoch, config.epochs, config.drop_remainder)
                        : CheckedMultiply(per_epoch, config.epochs).value_or(std::numeric_limits<std::int64_t>::max());
  return config.max_steps >= 0 ? std::min(all, config.max_steps) : all;
}

namespace {

// A fault or a dump at a step the run never reaches would do nothing, silently.
Status CheckStepsReachable(const TrainConfig& config, std::int64_t train_examples) {
  const std::int64_t last = LastStep(config, train_examples);
  const std::string limit = config.max_steps >= 0 && config.max_steps == last
                                ? "--steps " + std::to_string(last)
                                : std::to_string(config.epochs) + " epoch(s) of " + std::to_string(train_examples) +
                                      " examples at global batch " + std::to_string(config.global_batch_size());
  if (config.dump_step > last)
    return Status::InvalidArgument("--dump-step " + std::to_string(config.dump_step) +
                                   " is never reached: the run "
                                   "ends after step " +
                                   std::to_string(last) + " (" + limit +
                                   "); give a step from 1 "
                                   "to " +
                                   std::to_string(last) + " or raise --steps");
  for (const FaultSpec& fault : config.cluster.faults)
    if (fault.step > last)
      return Status::InvalidArgument("fault " + FaultSpecText(fault) + ": step=" + std::to_string(fault.step) +
                                     " is never reached: the run ends after step " + std::to_string(last) + " (" +
                                     limit + "); step must be from 1 to " + std::to_string(last));
  return Status::Ok();
}

// The cost model's work for one training example: forward and backward, about 6
// flops per parameter value.
double FlopsPerExample(const Sequential<float>& model) {
  return 6.0 * static_cast<double>(model.num_parameter_values());
}

// What the memory estimate reads of the run (sim/training/memory_estimate.h).
StatusOr<RunMemoryInput> MemoryInput(const TrainConfig& config, const Sequential<float>& model,
                                     const ImageDataset& train) {
  RunMemoryInput input;
  input.parameter_values = model.num_parameter_values();
  DTLAB_ASSIGN_OR_RETURN(auto optimizer, MakeOptimizer(config.optimizer, OptimizerOptions{}));
  input.optimizer_slots = static_cast<std::int64_t>(optimizer->SlotNames().size()) + (config.momentum != 0 ? 1 : 0);
  const std::int32_t workers = config.worker_group != nullptr ? config.worker_group->size() : 1;
  input.replicas = config.cluster.replicas / std::max(workers, 1);
  input.mpi_rank = config.worker_group != nullptr;
  input.exact = config.cluster.math == MathMode::kExact;
  input.accumulating = config.cluster.accumulation.on();
  input.central_storage = config.cluster.strategy == StrategyKind::kCentralStorage;
  // The reference check gathers a whole optimizer step, K micro-batches.
  input.global_batch =
      std::min(config.cluster.check_reference ? config.step_batch_size() : config.global_batch_size(), train.count);
  if (!config.global_batch)  // --batch-per-replica: the batch grows with the replicas
    input.batch_per_replica =
        config.batch_per_replica * (config.cluster.check_reference ? config.cluster.accumulation.steps : 1);
  input.batch_limit = train.count;
  input.example_values = train.height * train.width * train.channels;
  Shape shape = model.example_shape();
  for (const auto& layer : model.layers()) {
    shape = layer->OutputShape(shape);
    input.activation_values_per_example += NumElements(shape);
  }
  input.chunk_size = config.chunk_size;
  input.threads = tbb::this_task_arena::max_concurrency();
  input.staged = !BatchNormLayers(model).empty();
  for (const std::size_t layer : BatchNormLayers(model))
    input.batch_norm_words = std::max(input.batch_norm_words, BatchNormWords(model.layer_input_shape(layer).back()));
  input.all_reduce = config.cluster.all_reduce;
  input.compact = config.cluster.exact_all_reduce == ExactAllReduce::kCompact;
  if (Cluster::CanFold(config.cluster, model, config.worker_group != nullptr))
    input.fold_above = config.cluster.fold_above, input.fold_wave = Cluster::FoldWave();
  if (Cluster::MayCompactGradients(config.cluster, model))
    input.compacts_in_waves = true, input.fold_wave = Cluster::FoldWave();
  return input;
}

// What this process may allocate (AvailableMemoryForRun). Under mpirun the ranks of
// one machine share its memory: they exchange their machine's key and their
// estimates, and each counts the machine at its estimate's share of theirs together
// (the ranks of one run hold as many replicas each: an equal share), so that every
// rank fits exactly when their sum does.
StatusOr<std::optional<AvailableMemory>> AvailableToRank(const TrainConfig& config, double estimate_bytes,
                                                         double resident_bytes) {
  MachineShare share;
  if (WorkerGroup* group = config.worker_group; group != nullptr) {
    struct RankMemory {
      std::uint64_t machine;
      double bytes;
    };
    const RankMemory mine{MachineKey(), estimate_bytes};
    DTLAB_ASSIGN_OR_RETURN(const std::vector<RankMemory> all,
                           group->AllGatherOne(mine, "sharing the ranks' memory estimates", 0));
    double together = 0;
    share.ranks = 0;
    for (const RankMemory& rank : all)
      if (rank.machine == mine.machine) together += rank.bytes, ++share.ranks;
    share.fraction = std::isfinite(together) && together > 0 ? estimate_bytes / together : 1.0 / share.ranks;
  }
  return AvailableMemoryForRun(config.max_memory_bytes, resident_bytes, share);
}

// Under mpirun every rank refuses where one cannot fit, so that none starts training
// alone: `verdict` is this rank's on entry (CheckRunFitsInMemory), and a refusal if
// another rank's is. Returns the exchange's own failure, if any.
Status AgreeOnFit(const TrainConfig& config, Status& verdict) {
  WorkerGroup* group = config.worker_group;
  if (group == nullptr) return Status::Ok();
  const std::int32_t refused = verdict.ok() ? 0 : 1;
  DTLAB_ASSIGN_OR_RETURN(const std::vector<std::int32_t> all,
                         group->AllGatherOne(refused, "agreeing whether the run fits", 0));
  for (std::size_t rank = 0; rank < all.size() && verdict.ok(); ++rank)
    if (all[rank] != 0)
      verdict = Status::InvalidArgument("rank " + std::to_string(rank) +
                                        " cannot fit its replicas in memory (its own message says what it needs and "
                                        "what would fit); every rank stops before training");
  return Status::Ok();
}

// Refuses, before allocating, a run whose replicas cannot fit in memory.
Status CheckFitsInMemory(const TrainConfig& config, const RunMemoryInput& input) {
  const MemoryEstimate estimate = EstimateRunMemory(input);
  DTLAB_ASSIGN_OR_RETURN(const std::optional<AvailableMemory> available,
                         AvailableToRank(config, estimate.total_bytes, ResidentBytes()));
  Status verdict = CheckRunFitsInMemory(estimate, input, available);
  DTLAB_RETURN_IF_ERROR(AgreeOnFit(config, verdict));
  return verdict;
}

// --dry-run: the memory estimate and the cost model's time, nothing trained or written.
StatusOr<TrainReport> DryRun(const TrainConfig& config, const Sequential<float>& model, const ImageDataset& train) {
  DTLAB_RETURN_IF_ERROR(CheckStepsReachable(config, train.count));
  DTLAB_ASSIGN_OR_RETURN(const RunMemoryInput input, MemoryInput(config, model, train));
  DryRunReport dry;
  dry.memory = EstimateRunMemory(input);
  dry.resident_bytes = ResidentBytes();
  dry.peak_bytes = dry.resident_bytes + dry.memory.total_bytes;
  DTLAB_ASSIGN_OR_RETURN(dry.available, AvailableToRank(config, dry.memory.total_bytes, dry.resident_bytes));
  dry.fits = CheckRunFitsInMemory(dry.memory, input, dry.available);
  DTLAB_RETURN_IF_ERROR(AgreeOnFit(config, dry.fits));
  if (dry.available) dry.largest_replicas = LargestReplicasThatFit(input, dry.available->bytes);
  dry.steps = LastStep(config, train.count);
  DTLAB_ASSIGN_OR_RETURN(dry.step, EstimateFullStep(config, FlopsPerExample(model), model.num_parameter_values(),
                                                    &dry.time_not_estimated));
  dry.simulated_seconds = static_cast<double>(dry.steps) * (dry.step.compute_seconds + dry.step.collective_seconds);
  TrainReport report;
  report.model_summary = model.Summary();
  report.dry_run = std::move(dry);
  return report;
}

// The engine of the run's strategy: synchronous replicas (Cluster) or
// asynchronous workers and parameter servers (ParameterServerCluster), with the
// compute backend its replicas run on (declared first, so it outlives the engine).
struct RunEngine {
  std::unique_ptr<ComputeBackend> compute;
  std::unique_ptr<TrainingEngine> engine;
};

// BatchNormalization (core/batch_norm.h) trains under the strategies with mirrored
// variables (one_device, mirrored, multi_worker_mirrored, tpu), in float32, one
// micro-batch per step; the rest is refused with what to change.
Status CheckBatchNormRun(const TrainConfig& config, const Sequential<float>& model) {
  const std::vector<std::size_t> layers = BatchNormLayers(model);
  if (layers.empty()) return Status::Ok();
  const std::string what = "layer " + model.layers()[layers.front()]->name() + " (BatchNormalization): ";
  const StrategyKind strategy = config.cluster.strategy;
  if (strategy == StrategyKind::kParameterServer || strategy == StrategyKind::kCentralStorage)
    return Status::InvalidArgument(what + "the " + std::string(StrategyName(strategy)) +
                                   " strategy keeps one copy of the variables, and dtlab runs BatchNormalization "
                                   "only with mirrored ones (each replica updates its own moving statistics); use "
                                   "--strategy mirrored, multi_worker_mirrored, tpu or one_device");
  if (config.cluster.accumulation.on())
    return Status::InvalidArgument(what + "--accumulation-steps " + std::to_string(config.cluster.accumulation.steps) +
                                   ": each micro-batch would normalize by its own statistics and update the moving "
                                   "ones, which dtlab does not run yet; use --accumulation-steps 1");
  if (config.cluster.precision.half())
    return Status::InvalidArgument(what + "--precision " +
                                   std::string(PrecisionName(config.cluster.precision.compute)) +
                                   ": Keras computes BatchNormalization in float32 under a mixed policy, which dtlab "
                                   "does not run yet; use --precision float32");
  return Status::Ok();
}

StatusOr<RunEngine> MakeRunEngine(const TrainConfig& config, const Sequential<float>& model,
                                  const OptimizerOptions& optimizer_options, const ParameterList<float>& initial,
                                  double flops_per_example) {
  DTLAB_RETURN_IF_ERROR(CheckBatchNormRun(config, model));
  RunEngine made;
  Cluster* cluster = nullptr;
  if (config.cluster.strategy == StrategyKind::kParameterServer) {
    ParameterServerOptions options;
    options.workers = config.cluster.workers;
    options.parameter_servers = config.parameter_servers;
    options.seed = config.seed;
    options.straggler_spread = config.straggler_spread;
    options.device_flops_per_second = config.device_flops_per_second;
    options.flops_per_example = flops_per_example;
    options.link = config.link;
    options.math = config.cluster.math;
    options.loss = config.cluster.loss();
    options.batch_size = config.batch_per_replica;  // a worker's batch (its dataset_fn's, below)
    DTLAB_ASSIGN_OR_RETURN(made.engine,
                           ParameterServerCluster::Create(model, options, config.optimizer, optimizer_options, initial,
                                                          config.chunk_size, config.worker_group));
  } else {
    ClusterConfig cluster_config = config.cluster;
    cluster_config.dropout_seed = config.seed;  // Dropout's masks are keyed by the run's seed
    DTLAB_ASSIGN_OR_RETURN(auto synchronous, Cluster::Create(model, cluster_config, config.optimizer, optimizer_options,
                                                             initial, config.chunk_size, config.worker_group));
    cluster = synchronous.get();
    made.engine = std::move(synchronous);
  }
  if (config.make_compute_backend) {
    DTLAB_ASSIGN_OR_RETURN(made.compute, config.make_compute_backend(model));
    if (made.compute && cluster == nullptr)
      return Status::InvalidArgument(
          "--backend: the parameter-server strategy runs on the CPU only; the device "
          "backends run the synchronous strategies");
    if (made.compute) cluster->set_compute_backend(made.compute.get());
  }
  return made;
}

// How the training set reaches the replicas. Parameter-server workers each read
// their own shard, as the PS tutorial's dataset_fn does with
// distribute_datasets_from_function. --input function: the dataset_fn of the
// tutorials, batched by context.get_per_replica_batch_size(GLOBAL_BATCH_SIZE) (a
// ValueError in TF when N does not divide the global batch).
StatusOr<DistributedDataset> MakeTrainingInput(const TrainConfig& config, const ImageDataset& train) {
  const bool async = config.cluster.strategy == StrategyKind::kParameterServer;
  DistributedInputOptions input;
  input.num_elements = train.count;
  input.global_batch_size = config.global_batch_size();
  input.drop_remainder = config.drop_remainder;
  input.shuffle_buffer = config.shuffle_buffer > 0 ? config.shuffle_buffer : train.count;
  input.seed = config.seed;
  input.num_workers = config.cluster.workers;
  input.replicas_per_worker = config.cluster.replicas_per_worker();
  input.rule = config.rebatch;
  input.shard_policy = config.shard_policy;
  if (!async && config.input == InputApi::kDistributeDataset) return DistributedDataset::DistributeDataset(input);
  return DistributedDataset::DistributeDatasetsFromFunction(
      config.cluster.workers, async ? 1 : config.cluster.replicas_per_worker(),
      [&config, &train, async,
       shuffle_buffer = input.shuffle_buffer](const InputContext& context) -> StatusOr<Pipeline> {
        std::int64_t per_replica = config.batch_per_replica;
        if (!async) {
          DTLAB_ASSIGN_OR_RETURN(per_replica, context.GetPerReplicaBatchSize(config.global_batch_size()));
        }
        Pipeline pipeline(train.count);
        DTLAB_RETURN_IF_ERROR(pipeline.Shuffle(shuffle_buffer, config.seed));
        DTLAB_RETURN_IF_ERROR(pipeline.Shard(context.num_input_pipelines, context.input_pipeline_id));
        DTLAB_RETURN_IF_ERROR(pipeline.Batch(per_replica, config.drop_remainder));
        return pipeline;
      });
}

// Refuses, before any work, a run that cannot get to its end: a --dump-step or
// fault past the last step, replicas that do not fit in memory, a --trace file or
// --dump-dir that cannot be written (not discovered unwritable at the end).
// `memory` is MemoryInput's for the run.
Status CheckRunCanStart(const TrainConfig& config, const ImageDataset& train, const RunMemoryInput& memory) {
  DTLAB_RETURN_IF_ERROR(CheckStepsReachable(config, train.count));
  DTLAB_RETURN_IF_ERROR(CheckFitsInMemory(config, memory));
  DTLAB_RETURN_IF_ERROR(CheckAccumulationCheckpoints(config, [&]() -> StatusOr<std::int64_t> {
    DTLAB_ASSIGN_OR_RETURN(const DistributedDataset dataset, MakeTrainingInput(config, train));
    return static_cast<std::int64_t>(dataset.Iterate(0).size());
  }));
  if (!config.trace_path.empty()) DTLAB_RETURN_IF_ERROR(CheckOutputPath(config.trace_path, "--trace"));
  return PrepareStepDump(config);
}

// The epoch `state.epoch` as the loop asks it of the engine, from where `state` stands.
EpochRequest MakeEpochRequest(const TrainConfig& config, const TrainingState& state, const ImageDataset& train,
                              const EpochBatches& batches, float learning_rate, const TrainObserver& observer) {
  EpochRequest request;
  request.data = &train;
  request.batches = &batches;
  request.epoch = state.epoch;
  request.learning_rate = learning_rate;
  request.global_batch = config.global_batch_size();
  request.drop_remainder = config.drop_remainder;
  request.steps_before = state.step;
  request.max_steps = config.max_steps;
  request.first_step = state.step_in_epoch;
  request.first_worker_batches = state.worker_batches;
  request.capture_step = config.dump_step;
  request.every_reduced_gradient = observer.WantsReducedGradient();
  return request;
}

// A synchronous step for the observer, with the running metrics after it.
void FillStepRecord(const EngineStep& step, const TrainingState& state, const SparseCategoricalAccuracy& accuracy,
                    const ParameterList<float>& variables, StepRecord& record) {
  record.step = state.step;
  record.epoch = state.epoch + 1;
  record.mean_loss = state.train_loss_total / state.train_batches;
  record.accuracy = accuracy.Result();
  record.result = step.result;
  record.examples = step.batch;
  record.variables = &variables;
  record.reduced_gradient = step.reduced_gradient;
}

EpochReport MakeEpochReport(const TrainingState& state, float learning_rate, const SparseCategoricalAccuracy& accuracy,
                            const TestMetrics& test, double seconds, std::int64_t steps) {
  EpochReport epoch;
  epoch.epoch = state.epoch + 1;
  epoch.learning_rate = learning_rate;
  epoch.train_loss = state.train_batches > 0 ? state.train_loss_total / state.train_batches : 0.0f;
  epoch.train_accuracy = accuracy.Result();
  epoch.test_loss = test.loss;
  epoch.test_accuracy = test.accuracy;
  epoch.seconds = seconds;
  epoch.steps = steps;
  return epoch;
}

}  // namespace

StatusOr<TrainReport> Train(const TrainConfig& config, const TrainTestData& data, TrainObserver* observer) {
  DTLAB_RETURN_IF_ERROR(config.Validate());
  TrainObserver null_observer;
  if (!observer) observer = &null_observer;
  const ImageDataset& train = data.train;
  DTLAB_ASSIGN_OR_RETURN(
      auto model, MakeModel<float>(config.model, {train.height, train.width, train.channels}, train.num_classes));
  model->set_compute_type(config.cluster.precision.compute);  // Keras's dtype policy (--precision)
  if (config.dry_run) return DryRun(config, *model, train);
  // The run's memory: estimated (and refused when it cannot fit), then measured
  // (the peak resident set from here on).
  DTLAB_ASSIGN_OR_RETURN(const RunMemoryInput memory_input, MemoryInput(config, *model, train));
  DTLAB_RETURN_IF_ERROR(CheckRunCanStart(config, train, memory_input));
  const bool peak_measured = ResetPeakResident();
  const double estimated_peak = ResidentBytes() + EstimateRunMemory(memory_input).total_bytes;
  OptimizerOptions optimizer_options;
  optimizer_options.momentum = config.momentum;
  TrainingState state;
  DTLAB_ASSIGN_OR_RETURN(state.optimizer, MakeOptimizer(config.optimizer, optimizer_options));
  state.params = model->InitialParameters(config.seed);
  state.optimizer->Build(state.params);

  // Resume from the backup or checkpoint directory when it holds this run's checkpoint.
  TrainReport report;
  report.model_summary = model->Summary();
  RunCheckpoints checkpoints(config, *model, data.name, state, report);
  DTLAB_RETURN_IF_ERROR(checkpoints.Open(train.count));

  const double flops_per_example = FlopsPerExample(*model);
  DTLAB_ASSIGN_OR_RETURN(RunEngine run_engine,
                         MakeRunEngine(config, *model, optimizer_options, state.params, flops_per_example));
  TrainingEngine& engine = *run_engine.engine;
  if (report.resumed_from_step >= 0) engine.ImportState(state);
  DTLAB_ASSIGN_OR_RETURN(DistributedDataset dataset, MakeTrainingInput(config, train));
  report.input_description = dataset.Describe();
  if (config.cluster.accumulation.on())
    report.input_description += "; " + config.cluster.accumulation.Description(config.global_batch_size());
  DTLAB_ASSIGN_OR_RETURN(RunTiming timing, RunTiming::Create(config, flops_per_example, model->num_parameter_values()));
  if (config.cluster.check_reference) report.reference_check.emplace();
  observer->OnStart(report.model_summary, report.resumed_from_step);
  if (report.resume) observer->OnResume(*report.resume);
  observer->OnInput(report.input_description);

  BatchRunner evaluator(*model, config.chunk_size);
  std::int64_t images_trained = 0;
  double train_seconds = 0;
  const float default_rate = state.optimizer->default_learning_rate();
  bool stop = config.max_steps >= 0 && state.step >= config.max_steps;
  // A graceful stop: any rank asked, every rank stops (each reads its own request,
  // and they agree), so all stop after the same step.
  int stopped_by = 0;
  const std::function<StatusOr<bool>()> stop_requested = [&]() -> StatusOr<bool> {
    const std::int32_t mine = config.stop_request->load();
    stopped_by = mine;
    if (config.worker_group != nullptr) {
      DTLAB_ASSIGN_OR_RETURN(const std::vector<std::int32_t> all,
                             config.worker_group->AllGatherOne(mine, "agreeing to stop", state.step));
      stopped_by = *std::max_element(all.begin(), all.end());
    }
    return stopped_by != 0;
  };
  const bool async = config.cluster.strategy == StrategyKind::kParameterServer;
  for (; state.epoch < config.epochs && !stop; ++state.epoch) {
    const float learning_rate = LearningRateFor(config, default_rate, state.epoch + 1);
    const EpochBatches batches = dataset.Iterate(state.epoch);
    observer->OnEpochBegin(state.epoch + 1, learning_rate, OptimizerStepsInEpoch(config, state.epoch, batches.size()));
    const auto epoch_start = Clock::now();
    EpochRequest request = MakeEpochRequest(config, state, train, batches, learning_rate, *observer);
    if (config.stop_request != nullptr && !async) request.stop_after_step = stop_requested;
    // After every optimizer step: the dump, the reference check, the simulated
    // time, the running metrics, the observer and the checkpoints.
    float loss_scale = 0;
    std::int64_t skipped = 0;
    auto on_step = [&](const EngineStep& step) -> Status {
      if (step.result != nullptr) {
        loss_scale = step.result->loss_scale;
        skipped += step.result->skipped ? 1 : 0;
      }
      DTLAB_RETURN_IF_ERROR(DumpStepIfAsked(config, *model, train, step, learning_rate));
      if (step.result != nullptr && step.result->check) {
        report.reference_check->Add(*step.result->check);
        if (!step.result->check->within_bound) observer->OnReferenceFailure(*step.result->check);
      }
      StepRecord record;
      DTLAB_RETURN_IF_ERROR(timing.AddStep(step, engine.message_log(), record));
      state.step = step.step;
      state.step_in_epoch = step.step_in_epoch;
      state.worker_batches.assign(step.worker_batches.begin(), step.worker_batches.end());
      images_trained += step.examples;
      state.train_loss_total += step.loss;
      state.train_batches += 1.0f;
      const SparseCategoricalAccuracy accuracy = engine.MergedAccuracy();
      observer->OnStep(step.shown_done, step.shown_total, state.train_loss_total / state.train_batches,
                       accuracy.Result());
      if (step.result != nullptr) {  // StepRecord describes synchronous steps
        FillStepRecord(step, state, accuracy, engine.variables(), record);
        observer->OnTrainStep(record);
      }
      return checkpoints.AfterStep(engine, *observer);
    };
    const std::int64_t steps_before = state.step;
    DTLAB_ASSIGN_OR_RETURN(const EpochOutcome outcome, engine.TrainEpoch(request, on_step));
    state.step = outcome.steps;
    state.step_in_epoch = outcome.step_in_epoch;
    stop = outcome.stopped;
    const std::int64_t steps_this_epoch = state.step - steps_before;
    timing.AddEpoch(engine.message_log());
    if (!std::isfinite(state.train_loss_total))
      return Status::Runtime("the loss became non-finite in epoch " + std::to_string(state.epoch + 1) +
                             "; try a smaller --lr");
    const double epoch_train_seconds = SecondsSince(epoch_start);
    train_seconds += epoch_train_seconds;
    if (stopped_by != 0) break;  // stopped in the epoch: saved below, nothing evaluated
    if (steps_this_epoch == 0 && stop) break;

    observer->OnEvaluating();
    // Across MPI ranks only the chief reports, so only it evaluates.
    const TestMetrics test = checkpoints.chief() ? EvaluateTestSet(evaluator, engine.variables(), data.test,
                                                                   config.global_batch_size(), config.cluster.math)
                                                 : TestMetrics{};
    EpochReport epoch_report =
        MakeEpochReport(state, learning_rate, engine.MergedAccuracy(), test, epoch_train_seconds, steps_this_epoch);
    epoch_report.loss_scale = loss_scale;
    epoch_report.skipped_steps = skipped;
    report.skipped_steps += skipped;
    report.epochs.push_back(epoch_report);
    observer->OnEpochEnd(epoch_report);
    DTLAB_RETURN_IF_ERROR(checkpoints.AppendMetrics(epoch_report));
    if (stop) break;

    // The next epoch starts afresh.
    state.step_in_epoch = 0;
    state.worker_batches.clear();
    state.train_loss_total = state.train_batches = 0.0f;
    engine.ResetMetrics();
    DTLAB_RETURN_IF_ERROR(checkpoints.AfterEpoch(engine, *observer));
    // --steps ended on the epoch's last step: no next epoch to begin (nor announce).
    stop = config.max_steps >= 0 && state.step >= config.max_steps;
    if (config.stop_request != nullptr && async && !stop) {  // parameter_server stops between epochs
      DTLAB_ASSIGN_OR_RETURN(const bool stop_now, stop_requested());
      if (stop_now) {
        ++state.epoch;  // the next epoch, from its start
        break;
      }
    }
  }
  if (stopped_by != 0) {
    DTLAB_RETURN_IF_ERROR(checkpoints.Stopped(engine, *observer));
  } else {
    DTLAB_RETURN_IF_ERROR(checkpoints.Finish(engine, *observer));
  }
  report.stopped_by = stopped_by;

  report.steps = state.step;
  report.seconds = train_seconds;
  report.images_per_second = train_seconds > 0 ? static_cast<double>(images_trained) / train_seconds : 0.0;
  report.weights_digest = WeightsDigest(engine.variables());
  if (!report.epochs.empty()) {
    report.final_test_accuracy = report.epochs.back().test_accuracy;
    report.final_test_loss = report.epochs.back().test_loss;
  }
  DTLAB_RETURN_IF_ERROR(timing.Finish(report));
  report.estimated_peak_bytes = estimated_peak;
  report.peak_resident_bytes = peak_measured ? PeakResidentBytes() : 0.0;
  return report;
}

}  // namespace dtlab