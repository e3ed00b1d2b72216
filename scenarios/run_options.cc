#include "scenarios/run_options.h"

#include <charconv>
#include <filesystem>
#include <limits>

#include "core/checked_number.h"
#include "core/dropout.h"
#include "core/model.h"
#include "sim/comm/all_reduce_registry.h"
#include "sim/comm/collectives.h"
#include "sim/input/distributed_input.h"
#include "sim/comm/faults.h"
#include "sim/engines/accumulation.h"
#include "sim/engines/mixed_precision.h"
#include "sim/engines/strategy.h"
#include "sim/timing/topology.h"
#include "sim/training/memory_estimate.h"

namespace dtlab {
namespace {

using V = const OptionValue&;
using S = RunSettings&;

std::int64_t Int(V v) { return std::get<std::int64_t>(v); }
double Real(V v) { return std::get<double>(v); }
const std::string& Text(V v) { return std::get<std::string>(v); }
Status Ok() { return Status::Ok(); }

// A name through its parser (an enum's name table).
template <typename T, typename Parse>
Status SetName(V v, Parse parse, T& out) {
  DTLAB_ASSIGN_OR_RETURN(out, parse(Text(v)));
  return Ok();
}

constexpr std::int64_t kMillion = 1'000'000;

// The other way: a field's value as its option's apply takes it.
using R = const RunSettings&;
using Read = std::optional<OptionValue>;
Read AsText(std::string_view text) { return OptionValue(std::string(text)); }
Read AsInt(std::int64_t value) { return OptionValue(value); }
Read AsReal(double value) { return OptionValue(value); }

Read Split(R s) {
  const auto& split = s.config.cluster.regularization_split;
  return split ? AsText(RegularizationSplitName(*split)) : std::nullopt;
}

Read FaultTexts(R s) {
  std::vector<std::string> texts;
  for (const FaultSpec& fault : s.config.cluster.faults) texts.push_back(FaultSpecText(fault));
  return OptionValue(std::move(texts));
}

// --dataset's directory as a scenario file's data.source: absolute, because a
// file reads a relative directory from its own folder, not from where dtlab ran.
std::string DatasetAsFileSource(const std::string& dataset) {
  if (dataset.empty() || dataset == "fashion-mnist" || dataset == "mnist") return dataset;
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(dataset, error);
  return error ? dataset : absolute.lexically_normal().string();
}

// --model's file as a scenario file's model.name: absolute, for the same reason.
std::string ModelAsFileName(const std::string& model) {
  if (!IsModelFile(model)) return model;
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(model, error);
  return error ? model : absolute.lexically_normal().string();
}

// Each entry names only the fields it sets; the others keep RunOption's defaults.
// The table keeps its own layout: one option, a few lines, each field where a
// reader looks for it.
// clang-format off
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
std::vector<RunOption> MakeTable() {
  using enum OptionType;
  using enum OptionGroup;
  // The registry's names (sim/comm/all_reduce_registry.h), kept for the table's string_views.
  static const std::string kAllReduceHelp = AllReduceAlgorithmNames(" or ");
  return {
      {.group = kData, .flag = "model", .key = "model.name", .type = kText, .default_text = "seed-cnn",
       .help = "seed-cnn, mnist-cnn or linear, or a file of Keras's model.to_json() (a value with a '/' or "
               "ending in .json; docs/models.md)",
       .apply = [](V v, S s) { s.config.model = Text(v); return Ok(); },
       .read = [](R s) -> Read { return AsText(ModelAsFileName(s.config.model)); }},
      {.group = kData, .flag = "dropout-rng", .key = "run.dropout_rng", .type = kName, .default_text = "keyed",
       .help = "Dropout's masks: keyed (by example: N replicas equal one device) or per-replica (as TF: the run "
               "depends on the replica count)",
       .apply = [](V v, S s) { return SetName(v, ParseDropoutRng, s.config.cluster.dropout_rng); },
       .read = [](R s) -> Read { return AsText(DropoutRngName(s.config.cluster.dropout_rng)); }},
      {.group = kData, .flag = "dataset", .file_key = "data.source", .type = kText, .default_text = "fashion-mnist",
       .help = "fashion-mnist, mnist, or a directory holding the four IDX files",
       .apply = [](V v, S s) { s.config.dataset = Text(v); return Ok(); },
       .read = [](R s) -> Read { return AsText(DatasetAsFileSource(s.config.dataset)); }},
      {.group = kData, .flag = "epochs", .key = "run.epochs", .type = kInt64, .default_text = "10", .min = 1,
       .max = 1000,
       .help = "passes over the training set",
       .apply = [](V v, S s) { s.config.epochs = Int(v); return Ok(); },
       .read = [](R s) -> Read { return AsInt(s.config.epochs); }},
      {.group = kData, .flag = "batch-per-replica", .key = "data.batch_per_replica", .type = kInt64,
       .default_text = "64", .min = 1, .max = kMillion,
       .help = "examples per replica per step; the global batch is this times --replicas",
       .apply = [](V v, S s) { s.config.batch_per_replica = Int(v); return Ok(); },
       .read = [](R s) -> Read { return AsInt(s.config.batch_per_replica); }},
      {.group = kData, .flag = "global-batch", .key = "data.global_batch", .type = kInt64, .min = 1, .max = kMillion,
       .help = "the global batch instead (need not divide evenly: replicas may get short or empty batches)",
       .apply = [](V v, S s) { s.config.global_batch = Int(v); return Ok(); },
       .read = [](R s) -> Read { return s.config.global_batch ? AsInt(*s.config.global_batch) : std::nullopt; }},
      {.group = kData, .flag = "optimizer", .key = "optimizer.name", .type = kText, .default_text = "adam",
       .help = "adam, rmsprop or sgd",
       .apply = [](V v, S s) { s.config.optimizer = Text(v); return Ok(); },
       .read = [](R s) -> Read { return AsText(s.config.optimizer); }},
      {.group = kData, .flag = "lr", .key = "optimizer.learning_rate", .type = kFloat,
       .help = "learning rate (default: the optimizer's Keras default)",
       .apply = [](V v, S s) { s.config.learning_rate = static_cast<float>(Real(v)); return Ok(); },
       .read = [](R s) -> Read { return s.config.learning_rate ? AsReal(*s.config.learning_rate) : std::nullopt; }},
      {.group = kData, .flag = "momentum", .key = "optimizer.momentum", .type = kFloat, .default_text = "0",
       .help = "SGD momentum (sgd only; refused with adam or rmsprop)",
       .apply = [](V v, S s) { s.config.momentum = static_cast<float>(Real(v)); return Ok(); },
       .read = [](R s) -> Read { return AsReal(s.config.momentum); }},
      {.group = kData, .flag = "accumulation-steps", .key = "optimizer.accumulation_steps", .type = kInt64,
       .default_text = "1", .min = 1, .max = kMaxAccumulationSteps,
       .help = "gradient accumulation: micro-batches (each a global batch) per optimizer step; --steps, "
               "--checkpoint-every and the progress line count optimizer steps",
       .apply = [](V v, S s) { s.config.cluster.accumulation.steps = Int(v); return Ok(); },
       .read = [](R s) -> Read { return AsInt(s.config.cluster.accumulation.steps); }},
      {.group = kData, .flag = "accumulation", .key = "optimizer.accumulation", .type = kName,
       .default_text = "global",
       .help = "how accumulated micro-batches combine: global (dtlab's: one step of K x the global batch, the loss "
               "code seeing the whole step, a partial group at an epoch's end applied) or keras (Keras 3's "
               "gradient_accumulation_steps: the mean of the micro-batches' gradients, a mean of means when one is "
               "short; a partial group carried into the next epoch)",
       .apply = [](V v, S s) { return SetName(v, ParseAccumulationRule, s.config.cluster.accumulation.rule); },
       .read = [](R s) -> Read { return AsText(AccumulationRuleName(s.config.cluster.accumulation.rule)); }},
      {.group = kData, .flag = "lr-schedule", .type = kText,
       .help = "piecewise-constant rate by 1-based epoch, e.g. 1:1e-3,4:1e-4,8:1e-5, or 'tutorial'",
       .apply = [](V v, S s) {
         DTLAB_ASSIGN_OR_RETURN(s.config.schedule, ParseLearningRateSchedule(Text(v)));
         return Ok();
       }},
      {.group = kData, .flag = "seed", .key = "run.seed", .type = kUint64, .default_text = "1", .min = 0,
       .max = std::numeric_limits<std::int64_t>::max(),
       .help = "seed of weights and shuffling",
       .apply = [](V v, S s) { s.config.seed = std::get<std::uint64_t>(v); return Ok(); },
       .read = [](R s) -> Read { return OptionValue(s.config.seed); }},
      {.group = kData, .flag = "steps", .key = "run.steps", .type = kInt64, .min = 1, .max = kMillion,
       .help = "stop after this many optimizer steps in total",
       .apply = [](V v, S s) { s.config.max_steps = Int(v); return Ok(); },
       .read = [](R s) -> Read { return s.config.max_steps >= 0 ? AsInt(s.config.max_steps) : std::nullopt; }},
      {.group = kCheckpoints, .flag = "checkpoint-dir", .type = kText,
       .help = "save checkpoints and metrics.csv here; resume from it if it holds this run's checkpoint",
       .apply = [](V v, S s) { s.config.checkpoint_dir = Text(v); return Ok(); }},
      {.group = kCheckpoints, .flag = "checkpoint-every", .key = "run.checkpoint_every", .type = kInt64, .min = 0,
       .max = kMillion,
       .help = "save every K steps (default: after every 2nd epoch, as the tutorial)",
       .apply = [](V v, S s) { s.config.checkpoint_every = Int(v); return Ok(); },
       .read = [](R s) -> Read { return AsInt(s.config.checkpoint_every); }},
      {.group = kCheckpoints, .flag = "max-to-keep", .type = kInt32, .default_text = "5",
       .help = "checkpoints kept (0: all)",
       .apply = [](V v, S s) { s.config.max_to_keep = static_cast<int>(Int(v)); return Ok(); }},
      {.group = kOutputs, .flag = "dump-step", .type = kInt64,
       .help = "write the weights before step K, its batch and gradients",
       .apply = [](V v, S s) { s.config.dump_step = Int(v); return Ok(); }},
      {.group = kOutputs, .flag = "dump-dir", .type = kText,
       .help = "directory for --dump-step (step-K.safetensors)",
       .apply = [](V v, S s) { s.config.dump_dir = Text(v); return Ok(); }},
      {.group = kData, .flag = "shuffle-buffer", .key = "data.shuffle_buffer", .type = kInt64, .min = 0,
       .max = kMillion,
       .help = "shuffle buffer size (default: the whole training set)",
       .apply = [](V v, S s) { s.config.shuffle_buffer = Int(v); return Ok(); },
       .read = [](R s) -> Read { return AsInt(s.config.shuffle_buffer); }},
      {.group = kCluster, .flag = "threads", .type = kInt32, .default_text = "0", .process_only = true,
       .help = "worker threads, 0 for all cores (results never depend on it)",
       .apply = [](V v, S s) { s.threads = static_cast<int>(Int(v)); return Ok(); },
       .read = [](R s) -> Read { return AsInt(s.threads); }},
      {.group = kCluster, .flag = "fold-above", .key = "cluster.fold_above", .type = kInt32, .default_text = "256",
       .min = 0, .max = 4096,
       .help = "above this many replicas the gradients are summed by a folded reduction, not the all-reduce's "
               "buffers (exact mode: the same bits; fast mode: naive's)",
       .apply = [](V v, S s) { s.config.cluster.fold_above = static_cast<std::int32_t>(Int(v)); return Ok(); },
       .read = [](R s) -> Read { return AsInt(s.config.cluster.fold_above); }},
      {.group = kCluster, .flag = "exact-all-reduce", .key = "cluster.exact_all_reduce", .type = kName,
       .default_text = "compact",
       .help = "how exact mode all-reduces its gradients: compact (about 7 bytes per value, and the replicas keep "
               "their gradients encoded; docs/exact.md) or words (every value's 19 accumulator words); the same bits",
       .apply = [](V v, S s) { return SetName(v, ParseExactAllReduce, s.config.cluster.exact_all_reduce); },
       .read = [](R s) -> Read { return AsText(ExactAllReduceName(s.config.cluster.exact_all_reduce)); }},
      {.group = kCluster, .flag = "strategy", .key = "cluster.strategy", .type = kName, .default_text = "one_device",
       .help = "one_device, mirrored, central_storage, multi_worker_mirrored, tpu or parameter_server",
       .apply = [](V v, S s) { return SetName(v, ParseStrategy, s.config.cluster.strategy); },
       .read = [](R s) -> Read { return AsText(StrategyName(s.config.cluster.strategy)); }},
      {.group = kCluster, .flag = "replicas", .key = "cluster.replicas", .type = kInt32, .default_text = "1",
       .min = 1, .max = 4096,
       .help = "replicas in sync (all workers together)",
       .apply = [](V v, S s) { s.config.cluster.replicas = static_cast<std::int32_t>(Int(v)); return Ok(); },
       .read = [](R s) -> Read { return AsInt(s.config.cluster.replicas); }},
      {.group = kCluster, .flag = "workers", .key = "cluster.workers", .type = kInt32, .default_text = "1", .min = 1,
       .max = 4096,
       .help = "workers (multi_worker_mirrored); must divide --replicas",
       .apply = [](V v, S s) { s.config.cluster.workers = static_cast<std::int32_t>(Int(v)); return Ok(); },
       .read = [](R s) -> Read { return AsInt(s.config.cluster.workers); }},
      {.group = kCluster, .flag = "replicas-per-worker", .type = kInt32, .default_text = "1",
       .help = "under mpirun: replicas each rank holds (the run has ranks x this many replicas; docs/mpi.md)",
       .apply = [](V v, S s) { s.replicas_per_worker = static_cast<std::int32_t>(Int(v)); return Ok(); }},
      {.group = kCluster, .flag = "all-reduce", .key = "cluster.all_reduce", .type = kName, .default_text = "ring",
       .help = kAllReduceHelp,
       .apply = [](V v, S s) { return SetName(v, ParseAllReduceAlgorithm, s.config.cluster.all_reduce); },
       .read = [](R s) -> Read { return AsText(AllReduceAlgorithmName(s.config.cluster.all_reduce)); }},
      {.group = kLoss, .flag = "convention", .key = "loss.convention", .type = kName, .default_text = "tf",
       .help = "tf (SUM of globally scaled losses) or ddp (MEAN of per-replica means)",
       .apply = [](V v, S s) { return SetName(v, ParseConvention, s.config.cluster.convention); },
       .read = [](R s) -> Read { return AsText(ConventionName(s.config.cluster.convention)); }},
      {.group = kLoss, .flag = "loss-denominator", .key = "loss.denominator", .type = kName, .default_text = "global",
       .help = "what each replica divides its summed losses by: global (compute_average_loss(l, global_batch_size=G): "
               "the older tutorial), default (compute_average_loss(l): local batch x replicas, the current tutorial) "
               "or per-replica (tf.reduce_mean: the pitfall)",
       .apply = [](V v, S s) { return SetName(v, ParseLossDenominator, s.config.cluster.denominator); },
       .read = [](R s) -> Read { return AsText(LossDenominatorName(s.config.cluster.denominator)); }},
      {.group = kMath, .flag = "check-reference", .key = "run.check_reference", .type = kSwitch,
       .help = "compare every step with one device on the global batch (exit 1 if a step fails)",
       .apply = [](V v, S s) { s.config.cluster.check_reference = std::get<bool>(v); return Ok(); },
       .read = [](R s) -> Read { return OptionValue(s.config.cluster.check_reference); }},
      {.group = kMath, .flag = "math", .key = "run.math", .type = kName, .default_text = "fast",
       .help = "fast (checked against an error bound) or exact (bitwise equal to one device for any replica count)",
       .apply = [](V v, S s) { return SetName(v, ParseMathMode, s.config.cluster.math); },
       .read = [](R s) -> Read { return AsText(MathModeName(s.config.cluster.math)); }},
      {.group = kMath, .flag = "precision", .key = "model.precision", .type = kName, .default_text = "float32",
       .help = "Keras's dtype policy: float32, mixed_float16 or mixed_bfloat16 (float32 variables, the layers "
               "computing in the half type: values rounded to it at every layer boundary; docs/mixed_precision.md)",
       .apply = [](V v, S s) { return SetName(v, ParsePrecision, s.config.cluster.precision.compute); },
       .read = [](R s) -> Read { return AsText(PrecisionName(s.config.cluster.precision.compute)); }},
      {.group = kMath, .flag = "loss-scale", .key = "optimizer.loss_scale", .type = kName,
       .help = "none, or dynamic: Keras's LossScaleOptimizer (the loss times a scale that halves, skipping the "
               "step, when a gradient overflows, and doubles after --loss-scale-growth-steps finite steps); "
               "default: dynamic with --precision mixed_float16, else none",
       .apply = [](V v, S s) {
         const std::string name = Text(v);
         if (name != "none" && name != "dynamic")
           return Status::InvalidArgument("unknown loss scale '" + name + "' (expected one of: none, dynamic)");
         s.config.cluster.precision.dynamic_loss_scale = name == "dynamic";
         return Ok();
       },
       .read = [](R s) -> Read { return AsText(s.config.cluster.precision.dynamic_loss_scale ? "dynamic" : "none"); }},
      {.group = kMath, .flag = "loss-scale-initial", .key = "optimizer.loss_scale_initial", .type = kFloat,
       .default_text = "32768", .help = "the dynamic loss scale's first value (Keras: 2^15)",
       .apply = [](V v, S s) { s.config.cluster.precision.initial_scale = static_cast<float>(Real(v)); return Ok(); },
       .read = [](R s) -> Read { return AsReal(s.config.cluster.precision.initial_scale); }},
      {.group = kMath, .flag = "loss-scale-growth-steps", .key = "optimizer.loss_scale_growth_steps", .type = kInt64,
       .default_text = "2000", .min = 1, .max = kMillion,
       .help = "finite steps in a row after which the dynamic loss scale doubles (Keras: 2000)",
       .apply = [](V v, S s) { s.config.cluster.precision.growth_steps = Int(v); return Ok(); },
       .read = [](R s) -> Read { return AsInt(s.config.cluster.precision.growth_steps); }},
      {.group = kMath, .flag = "loss-scale-check", .key = "optimizer.loss_scale_check", .type = kName,
       .default_text = "reduced",
       .help = "whose gradients decide that a step is skipped: reduced (the all-reduced ones: every replica agrees), "
               "first-replica (replica 0's own, as TF 2.21 does: an overflow elsewhere reaches the weights) or "
               "each-replica (each its own: the pitfall, the mirrored variables diverge)",
       .apply = [](V v, S s) { return SetName(v, ParseLossScaleCheck, s.config.cluster.precision.check); },
       .read = [](R s) -> Read { return AsText(LossScaleCheckName(s.config.cluster.precision.check)); }},
      {.group = kCluster, .flag = "backend", .type = kText, .default_text = "cpu", .process_only = true,
       .help = "where the replicas compute: cpu, cuda (GPUs; docs/gpu.md) or emulated (the CUDA kernels on the CPU)",
       .apply = [](V v, S s) { s.backend = Text(v); return Ok(); },
       .read = [](R s) -> Read { return AsText(s.backend); }},
      {.group = kCluster, .flag = "devices", .type = kText, .process_only = true,
       .help = "--backend cuda: the GPUs, e.g. 0,1 (default 0)",
       .apply = [](V v, S s) { s.devices = Text(v); return Ok(); },
       .read = [](R s) -> Read { return AsText(s.devices); }},
      {.group = kCluster, .flag = "streams", .type = kInt32, .default_text = "0", .process_only = true,
       .help = "--backend cuda: streams per GPU; emulated: lanes (0: one per replica)",
       .apply = [](V v, S s) { s.streams = static_cast<int>(Int(v)); return Ok(); },
       .read = [](R s) -> Read { return AsInt(s.streams); }},
      {.group = kLoss, .flag = "regularization-split", .key = "loss.split", .type = kName,
       .help = "tf (every replica adds 1/N of it) or exact (replica 0 adds all of it); default: exact with --math "
               "exact, else tf",
       .apply = [](V v, S s) {
         RegularizationSplit split = RegularizationSplit::kTf;
         DTLAB_RETURN_IF_ERROR(SetName(v, ParseRegularizationSplit, split));
         s.config.cluster.regularization_split = split;
         return Ok();
       },
       .read = [](R s) -> Read { return Split(s); }},
      {.group = kLoss, .flag = "regularization-scaling", .key = "loss.regularization", .type = kName,
       .default_text = "scaled",
       .help = "scaled (scale_regularization_loss: r / N per replica) or unscaled (each replica adds r: the pitfall)",
       .apply = [](V v, S s) {
         return SetName(v, ParseRegularizationScaling, s.config.cluster.regularization_scaling);
       },
       .read = [](R s) -> Read { return AsText(RegularizationScalingName(s.config.cluster.regularization_scaling)); }},
      {.group = kLoss, .flag = "empty-replica-loss", .key = "loss.empty_replica", .type = kName, .default_text = "zero",
       .help = "an empty replica under the default denominator: zero (TF 2.13 and later: its loss is 0) or error (TF "
               "2.12 and before: InvalidArgumentError, the run stops)",
       .apply = [](V v, S s) { return SetName(v, ParseEmptyReplicaLoss, s.config.cluster.empty_replica); },
       .read = [](R s) -> Read { return AsText(EmptyReplicaLossName(s.config.cluster.empty_replica)); }},
      {.group = kLoss, .flag = "loss-reduction", .key = "loss.reduction", .type = kName, .default_text = "none",
       .help = "the loss object's reduction: none, sum, sum_over_batch_size (Keras 3 runs it: local mean / replicas; "
               "Keras 2 refuses it) or auto (Keras 2 only, refused)",
       .apply = [](V v, S s) { return SetName(v, ParseLossReduction, s.config.cluster.reduction); },
       .read = [](R s) -> Read { return AsText(LossReductionName(s.config.cluster.reduction)); }},
      {.group = kLoss, .flag = "keras", .key = "loss.keras", .type = kName, .default_text = "3", .integer_name = true,
       .help = "the Keras the loss object comes from: 3 (tf.keras since TF 2.16) or 2 (TF 2.15 and before, or "
               "tf_keras)",
       .apply = [](V v, S s) { return SetName(v, ParseKerasVersion, s.config.cluster.keras); },
       .read = [](R s) -> Read { return AsText(KerasVersionName(s.config.cluster.keras)); }},
      {.group = kFaults, .flag = "inject-fault", .key = "run.faults", .type = kTextList,
       .help = "inject a fault, e.g. die:replica=2,step=5 (kinds: throw, die, straggler, drop, corrupt, nan; "
               "docs/reliability.md); repeatable",
       .apply = [](V v, S s) {
         for (const std::string& text : std::get<std::vector<std::string>>(v)) {
           DTLAB_ASSIGN_OR_RETURN(const FaultSpec fault, ParseFaultSpec(text));
           s.config.cluster.faults.push_back(fault);
         }
         return Ok();
       },
       .read = [](R s) -> Read { return FaultTexts(s); }},
      {.group = kFaults, .flag = "collective-timeout", .key = "run.collective_timeout", .type = kDouble,
       .default_text = "60",
       .help = "how long a collective waits for a replica before the run stops (simulated seconds; under mpirun, "
               "wall-clock seconds for a rank)",
       .apply = [](V v, S s) { s.config.cluster.collective_timeout_seconds = Real(v); return Ok(); },
       .read = [](R s) -> Read { return AsReal(s.config.cluster.collective_timeout_seconds); }},
      {.group = kCheckpoints, .flag = "backup-dir", .type = kText,
       .help = "BackupAndRestore: back the whole state up here, resume from it first, delete it when training ends",
       .apply = [](V v, S s) { s.config.backup_dir = Text(v); return Ok(); }},
      {.group = kCheckpoints, .flag = "backup-every", .type = kInt64,
       .help = "back up every K steps (default: at the end of every epoch)",
       .apply = [](V v, S s) { s.config.backup_every = Int(v); return Ok(); }},
      {.group = kData, .flag = "input", .key = "data.input", .type = kName, .default_text = "dataset",
       .help = "how the data reaches the replicas: dataset (experimental_distribute_dataset of the global batches, "
               "split per replica) or function (distribute_datasets_from_function: each replica reads per-replica "
               "batches; the replicas must divide the global batch)",
       .apply = [](V v, S s) { return SetName(v, ParseInputApi, s.config.input); },
       .read = [](R s) -> Read { return AsText(InputApiName(s.config.input)); }},
      {.group = kData, .flag = "rebatch", .key = "data.rebatch", .type = kName, .default_text = "v2",
       .help = "the split rule experimental_distribute_dataset asks for: v2 or legacy. auto-shard auto or data "
               "rewrites v2 into legacy (RewriteRebatchV2ToV1), even on one worker, so the default split is legacy; "
               "the Input line says which rule is in force",
       .apply = [](V v, S s) { return SetName(v, ParseRebatchRule, s.config.rebatch); },
       .read = [](R s) -> Read { return AsText(RebatchRuleName(s.config.rebatch)); }},
      {.group = kData, .flag = "auto-shard", .key = "data.shard", .type = kName, .default_text = "auto",
       .help = "the dataset's auto_shard_policy: off, auto (applies data: the pipeline reads no files), file, data "
               "or hint; it shards across workers and picks the split rule (auto, data: legacy)",
       .apply = [](V v, S s) { return SetName(v, ParseAutoShardPolicy, s.config.shard_policy); },
       .read = [](R s) -> Read { return AsText(AutoShardPolicyName(s.config.shard_policy)); }},
      {.group = kData, .flag = "drop-remainder", .key = "data.drop_remainder", .type = kSwitch,
       .help = "drop the last short global batch of each epoch",
       .apply = [](V v, S s) { s.config.drop_remainder = std::get<bool>(v); return Ok(); },
       .read = [](R s) -> Read { return OptionValue(s.config.drop_remainder); }},
      {.group = kCluster, .flag = "topology", .key = "cluster.topology", .type = kName,
       .default_text = "fully_connected",
       .help = "cost model: fully_connected, ring, switch or torus2d (tpu uses torus2d)",
       .apply = [](V v, S s) { return SetName(v, ParseTopologyKind, s.config.topology); },
       .read = [](R s) -> Read { return AsText(TopologyKindName(s.config.topology)); }},
      // The command line's units; the config holds seconds, bytes and flops.
      {.group = kCluster, .flag = "link-latency-us", .type = kDouble, .default_text = "5",
       .help = "cost model: per-hop latency",
       .apply = [](V v, S s) { s.config.link.latency_seconds = Real(v) * 1e-6; return Ok(); }},
      {.group = kCluster, .flag = "link-gbps", .type = kDouble, .default_text = "25",
       .help = "cost model: link bandwidth, GB/s",
       .apply = [](V v, S s) { s.config.link.bandwidth_bytes_per_second = Real(v) * 1e9; return Ok(); }},
      {.group = kCluster, .flag = "device-gflops", .type = kDouble, .default_text = "100",
       .help = "cost model: one replica's compute speed",
       .apply = [](V v, S s) { s.config.device_flops_per_second = Real(v) * 1e9; return Ok(); }},
      {.group = kOutputs, .flag = "trace", .type = kText, .process_only = true,
       .help = "write a Chrome trace-event JSON (open in Perfetto) of the first steps",
       .apply = [](V v, S s) { s.config.trace_path = Text(v); return Ok(); },
       .read = [](R s) -> Read { return AsText(s.config.trace_path); }},
      {.group = kOutputs, .flag = "trace-steps", .type = kInt64, .default_text = "3", .process_only = true,
       .help = "steps in the trace",
       .apply = [](V v, S s) { s.config.trace_steps = Int(v); return Ok(); },
       .read = [](R s) -> Read { return AsInt(s.config.trace_steps); }},
      {.group = kCluster, .flag = "parameter-servers", .key = "cluster.parameter_servers", .type = kInt32,
       .default_text = "1", .min = 1, .max = 1024,
       .help = "parameter_server: tasks holding the variables (round-robin by variable)",
       .apply = [](V v, S s) { s.config.parameter_servers = static_cast<std::int32_t>(Int(v)); return Ok(); },
       .read = [](R s) -> Read { return AsInt(s.config.parameter_servers); }},
      {.group = kCluster, .flag = "straggler-spread", .key = "cluster.straggler_spread", .type = kDouble,
       .default_text = "0.5",
       .help = "parameter_server: a worker's step takes (1 + spread x uniform[0,1)) x its compute time",
       .apply = [](V v, S s) { s.config.straggler_spread = Real(v); return Ok(); },
       .read = [](R s) -> Read { return AsReal(s.config.straggler_spread); }},
      {.group = kOutputs, .flag = "dry-run", .type = kSwitch, .process_only = true,
       .help = "print the run's estimated peak memory and its simulated time (the cost model), and the most "
               "replicas that fit; train nothing (exit 2 if the run would not fit)",
       .apply = [](V v, S s) { s.config.dry_run = std::get<bool>(v); return Ok(); },
       .read = [](R s) -> Read { return OptionValue(s.config.dry_run); }},
      {.group = kCluster, .flag = "max-memory", .type = kText, .process_only = true,
       .help = "refuse (exit 2) a run whose estimated peak memory is above this, e.g. 4G, 512M, 1.5GiB "
               "(K, M, G, T and KiB..TiB are powers of 1024; KB, MB, GB, TB of 1000); default: what the machine "
               "has available",
       .apply = [](V v, S s) {
         if (Text(v).empty()) return Ok();
         DTLAB_ASSIGN_OR_RETURN(s.config.max_memory_bytes, ParseByteSize(Text(v), "--max-memory"));
         return Ok();
       },
       .read = [](R s) -> Read { return AsText(s.config.max_memory_bytes > 0 ? BytesText(s.config.max_memory_bytes) : ""); }},
      {.group = kOutputs, .flag = "json", .type = kSwitch, .process_only = true,
       .help = "print one JSON summary on stdout (the per-epoch lines go to stderr)",
       .apply = [](V v, S s) { s.json = std::get<bool>(v); return Ok(); },
       .read = [](R s) -> Read { return OptionValue(s.json); }},
      {.group = kOutputs, .flag = "no-progress", .type = kSwitch, .process_only = true,
       .help = "never draw the progress bar",
       .apply = [](V v, S s) { s.no_progress = std::get<bool>(v); return Ok(); },
       .read = [](R s) -> Read { return OptionValue(s.no_progress); }},
      // Scenario files only: `dtlab train` reads a whole data set named by --dataset.
      {.group = kData, .key = "data.source", .type = kText,
       .help = "fashion-mnist, mnist, synthetic, or a directory (relative to the scenario file)",
       .apply = [](V v, S s) { s.data.source = Text(v); return Ok(); },
       .read = [](R s) -> Read { return AsText(s.data.source); }},
      {.group = kData, .key = "data.train_examples", .type = kInt64, .min = 0, .max = kMillion,
       .help = "the first N training examples (0: all); synthetic: how many",
       .apply = [](V v, S s) { s.data.train_examples = Int(v); return Ok(); },
       .read = [](R s) -> Read { return AsInt(s.data.train_examples); }},
      {.group = kData, .key = "data.test_examples", .type = kInt64, .min = 0, .max = kMillion,
       .help = "the first N test examples (0: all); synthetic: how many (default 500)",
       .apply = [](V v, S s) { s.data.test_examples = Int(v); return Ok(); },
       .read = [](R s) -> Read { return AsInt(s.data.test_examples); }},
  };
}
#pragma GCC diagnostic pop
// clang-format on

}  // namespace

const std::vector<RunOptionGroup>& RunOptionGroups() {
  static const std::vector<RunOptionGroup> kGroups = {
      {OptionGroup::kData, "Model and data"},     {OptionGroup::kCluster, "Cluster"},
      {OptionGroup::kLoss, "Loss code"},          {OptionGroup::kMath, "Math"},
      {OptionGroup::kCheckpoints, "Checkpoints"}, {OptionGroup::kFaults, "Faults"},
      {OptionGroup::kOutputs, "Outputs"},
  };
  return kGroups;
}

const std::vector<RunOption>& RunOptionTable() {
  static const std::vector<RunOption> kTable = MakeTable();
  return kTable;
}

const RunOption* FindRunOptionByFlag(std::string_view flag) {
  for (const RunOption& option : RunOptionTable())
    if (!flag.empty() && option.flag == flag) return &option;
  return nullptr;
}

const RunOption* FindRunOptionByKey(std::string_view key) {
  for (const RunOption& option : RunOptionTable())
    if (!key.empty() && option.key == key) return &option;
  return nullptr;
}

const std::vector<RunOptionSection>& RunOptionSections() {
  static const std::vector<RunOptionSection> kSections = {
      {"cluster",
       {"strategy", "replicas", "workers", "all_reduce", "fold_above", "exact_all_reduce", "topology",
        "parameter_servers", "straggler_spread"}},
      {"data",
       {"source", "train_examples", "test_examples", "global_batch", "batch_per_replica", "input", "rebatch", "shard",
        "drop_remainder", "shuffle_buffer"}},
      {"model", {"name", "precision"}},
      {"loss", {"convention", "denominator", "regularization", "split", "reduction", "keras", "empty_replica"}},
      {"optimizer",
       {"name", "learning_rate", "momentum", "accumulation_steps", "accumulation", "loss_scale", "loss_scale_initial",
        "loss_scale_growth_steps", "loss_scale_check"}},
      {"run",
       {"math", "steps", "epochs", "seed", "check_reference", "checkpoint_every", "faults", "collective_timeout",
        "dropout_rng"}},
  };
  return kSections;
}

StatusOr<OptionValue> ParseOptionText(const RunOption& option, std::string_view text) {
  // Appended, not "'" + std::string(...): GCC 12 warns about that (-Wrestrict, a false positive).
  std::string what = option.flag.empty() ? "'" : "--";
  what.append(option.flag.empty() ? option.key : option.flag);
  if (option.flag.empty()) what += "'";
  switch (option.type) {
    case OptionType::kSwitch:
      if (text == "true" || text == "false") return OptionValue(text == "true");
      return Status::InvalidArgument(what + " must be true or false, got '" + std::string(text) + "'");
    case OptionType::kInt32: {
      DTLAB_ASSIGN_OR_RETURN(const std::int32_t value, ParseInteger<std::int32_t>(text, what));
      return OptionValue(std::int64_t{value});
    }
    case OptionType::kInt64: {
      DTLAB_ASSIGN_OR_RETURN(const std::int64_t value, ParseInteger<std::int64_t>(text, what));
      return OptionValue(value);
    }
    case OptionType::kUint64: {
      DTLAB_ASSIGN_OR_RETURN(const std::uint64_t value, ParseInteger<std::uint64_t>(text, what));
      return OptionValue(value);
    }
    case OptionType::kFloat:
    case OptionType::kDouble: {
      double value = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (text.empty() || error != std::errc() || end != text.data() + text.size())
        return Status::InvalidArgument(what + " must be a number, got '" + std::string(text) + "'");
      DTLAB_RETURN_IF_ERROR(CheckFinite(value, what));
      if (option.type == OptionType::kFloat) value = static_cast<float>(value);
      return OptionValue(value);
    }
    case OptionType::kName:
    case OptionType::kText:
      return OptionValue(std::string(text));
    case OptionType::kTextList:
      return OptionValue(std::vector<std::string>{std::string(text)});
  }
  return Status::InvalidArgument(what + ": unknown option type");
}

void ApplyDependentDefaults(RunSettings& settings, OptionSource source) {
  ClusterConfig& cluster = settings.config.cluster;
  if (cluster.strategy == StrategyKind::kParameterServer && !settings.Given("replicas"))
    cluster.replicas = cluster.workers;
  if (cluster.strategy == StrategyKind::kTpu && !settings.Given("topology"))
    settings.config.topology = TopologyKind::kTorus2D;
  if (source == OptionSource::kCommandLine && cluster.replicas > 1 && !settings.Given("strategy"))
    cluster.strategy = StrategyKind::kMirrored;
  // Keras's guide wraps the optimizer in a LossScaleOptimizer under mixed_float16
  // (Model.compile does it itself); bfloat16 has float32's range and needs none.
  if (cluster.precision.compute == ComputeType::kFloat16 && !settings.Given("loss-scale"))
    cluster.precision.dynamic_loss_scale = true;
}

}  // namespace dtlab
