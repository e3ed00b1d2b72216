#include "sim/trainer.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>

#include <tbb/task_arena.h>

#include "core/batch.h"
#include "core/checked_number.h"
#include "core/checkpoint_manager.h"
#include "core/dataset.h"
#include "core/file_io.h"
#include "core/loss.h"
#include "core/text.h"
#include "core/training_state.h"
#include "sim/batch_runner.h"
#include "sim/cost_model.h"
#include "sim/memory_estimate.h"
#include "sim/parameter_server.h"
#include "sim/trace.h"

namespace dtlab {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

float LearningRateFor(const TrainConfig& config, float default_rate, std::int64_t epoch) {
  float rate = config.learning_rate.value_or(default_rate);
  for (const auto& [first_epoch, value] : config.schedule)
    if (epoch >= first_epoch) rate = value;
  return rate;
}

// The settings a checkpoint records in its metadata (docs/checkpoints.md). Only
// the model and the optimizer must match for a run to resume (CheckCheckpointFits);
// the others may differ and are reported as changes (DescribeResume). In exact
// mode a run's numbers do not depend on how the global batch is spread over
// replicas, workers or chunks, so that is not recorded: a checkpoint of 3 mirrored
// replicas is byte-identical to one device's.
std::map<std::string, std::string> RecordedSettings(const TrainConfig& config) {
  if (config.cluster.math == MathMode::kExact)
    return {
        {"dtlab.model", config.model},
        {"dtlab.optimizer", config.optimizer},
        {"dtlab.global_batch", std::to_string(config.global_batch_size())},
        {"dtlab.seed", std::to_string(config.seed)},
        {"dtlab.shuffle_buffer", std::to_string(config.shuffle_buffer)},
        {"dtlab.math", "exact"},
    };
  return {
      {"dtlab.model", config.model},
      {"dtlab.optimizer", config.optimizer},
      {"dtlab.batch_per_replica", std::to_string(config.batch_per_replica)},
      {"dtlab.global_batch", std::to_string(config.global_batch_size())},
      {"dtlab.seed", std::to_string(config.seed)},
      {"dtlab.shuffle_buffer", std::to_string(config.shuffle_buffer)},
      {"dtlab.chunk_size", std::to_string(config.chunk_size)},
      {"dtlab.strategy", std::string(StrategyName(config.cluster.strategy))},
      {"dtlab.replicas", std::to_string(config.cluster.replicas)},
      {"dtlab.workers", std::to_string(config.cluster.workers)},
  };
}

// The recorded settings a resumed run may change, in the order a change is
// reported. A fast-mode checkpoint has no dtlab.math (it reads "fast").
// dtlab.batch_per_replica is left out: the global batch and the replica count
// say what it did (and under --global-batch it is not the batch a replica got).
constexpr const char* kChangeableSettings[] = {
    "dtlab.dataset",      "dtlab.math",       "dtlab.strategy", "dtlab.replicas",       "dtlab.workers",
    "dtlab.global_batch", "dtlab.chunk_size", "dtlab.seed",     "dtlab.shuffle_buffer",
};

std::optional<std::string> RecordedValue(const std::map<std::string, std::string>& metadata, const std::string& key) {
  auto it = metadata.find(key);
  if (it != metadata.end()) return it->second;
  if (key == "dtlab.math") return std::string("fast");
  return std::nullopt;
}

// A count from the checkpoint's metadata: nullopt if absent; Corruption unless a
// whole number in [1, 2^31) (the range of --replicas and a sane batch).
StatusOr<std::optional<std::int64_t>> RecordedCount(const SafetensorsFile& checkpoint, const std::string& key,
                                                    const std::string& path) {
  auto it = checkpoint.metadata.find(key);
  if (it == checkpoint.metadata.end()) return std::optional<std::int64_t>();
  std::int64_t value = 0;
  const std::string& text = it->second;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 1 || value >= (std::int64_t{1} << 31))
    return Status::Corruption(path + ": the metadata's " + key + " is '" + Printable(text) +
                              "', not a whole number from 1 to 2^31-1; the checkpoint is damaged (delete it, or use "
                              "another --checkpoint-dir)");
  return std::optional<std::int64_t>(value);
}

std::string JoinNames(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

// InvalidArgument unless `checkpoint` was written for this run's model and
// optimizer: the same names, the model's variables with their shapes, and the
// optimizer's slots. That is what TF's restore matches (by object path and
// shape); the strategy, replica count and batch are not part of it. `where` names
// the option and directory.
Status CheckCheckpointFits(const SafetensorsFile& checkpoint, const Sequential<float>& model, const Optimizer& optimizer,
                           const TrainConfig& config, const std::string& where, const std::string& path) {
  const std::string afresh = ", or use another directory (or delete this one) to start afresh";
  for (const char* key : {"dtlab.model", "dtlab.optimizer"})
    if (!checkpoint.metadata.count(key))
      return Status::Corruption(path + ": no " + key + " in the metadata; not a dtlab training checkpoint (use another "
                                "directory, or delete this one to start afresh)");
  const std::string saved_model = Printable(checkpoint.metadata.at("dtlab.model"));
  if (saved_model != config.model)
    return Status::InvalidArgument(where + " holds a checkpoint of another model (" + saved_model + " there, " +
                                   config.model + " here): its weights cannot be mapped onto " + config.model +
                                   "; resume with --model " + saved_model + afresh);
  std::vector<std::string> saved_slots;
  std::int64_t saved_model_tensors = 0;
  for (const TensorEntry& entry : checkpoint.entries()) {
    const std::string_view name = entry.name;
    if (name.starts_with("model/")) ++saved_model_tensors;
    if (!name.starts_with("optimizer/")) continue;
    const auto slash = name.find('/', 10);
    if (slash == std::string_view::npos) continue;  // optimizer/iterations
    const std::string slot = Printable(name.substr(10, slash - 10));
    if (std::find(saved_slots.begin(), saved_slots.end(), slot) == saved_slots.end()) saved_slots.push_back(slot);
  }
  for (const auto& p : model.parameters()) {
    const TensorEntry* entry = checkpoint.Find("model/" + p.name);
    if (entry == nullptr)
      return Status::InvalidArgument(where + " holds a checkpoint of another model: it has no variable model/" + p.name +
                                     " of " + config.model + "; resume with the model it was written for" + afresh);
    if (entry->shape != p.spec.shape)
      return Status::InvalidArgument(where + " holds a checkpoint of another model: its model/" + p.name +
                                     " has shape " + ShapeToString(entry->shape) + " but " + config.model +
                                     " on this data set expects " + ShapeToString(p.spec.shape) +
                                     " (another image size or class count); resume with the --dataset it was "
                                     "trained on" + afresh);
  }
  if (saved_model_tensors != static_cast<std::int64_t>(model.parameters().size()))
    return Status::InvalidArgument(where + " holds a checkpoint of another model: it has " +
                                   std::to_string(saved_model_tensors) + " model variables, " + config.model + " has " +
                                   std::to_string(model.parameters().size()) + afresh);
  const std::string saved_optimizer = Printable(checkpoint.metadata.at("dtlab.optimizer"));
  std::vector<std::string> slots = optimizer.SlotNames();
  std::vector<std::string> sorted_saved = saved_slots, sorted_slots = slots;
  std::sort(sorted_saved.begin(), sorted_saved.end());
  std::sort(sorted_slots.begin(), sorted_slots.end());
  if (saved_optimizer != config.optimizer || sorted_saved != sorted_slots)
    return Status::InvalidArgument(
        where + " holds a checkpoint of another optimizer (" + saved_optimizer + " with slots " +
        JoinNames(saved_slots) + " there, " + config.optimizer + " with slots " + JoinNames(slots) +
        " here): its slots cannot be mapped onto this optimizer's; resume with --optimizer " + saved_optimizer +
        (saved_optimizer == "sgd" ? (saved_slots.empty() ? " --momentum 0" : " and a --momentum above 0") : "") +
        afresh);
  return Status::Ok();
}

// What a run resumed from `checkpoint` (already restored into `state`) takes
// over, and which of the checkpoint's recorded settings this run changes.
StatusOr<ResumeReport> DescribeResume(const SafetensorsFile& checkpoint, const std::string& path,
                                      const std::map<std::string, std::string>& recorded, const TrainConfig& config,
                                      const Sequential<float>& model, const TrainingState& state,
                                      std::int64_t epoch_examples) {
  ResumeReport resume;
  resume.checkpoint = path;
  resume.step = state.step;
  resume.epoch = state.epoch + 1;
  resume.model_variables = static_cast<std::int64_t>(model.parameters().size());
  resume.optimizer_slots = state.optimizer->SlotNames();
  resume.optimizer_slot_variables = resume.model_variables * static_cast<std::int64_t>(resume.optimizer_slots.size());
  resume.optimizer_iterations = state.optimizer->iterations();
  // Both sides record the layout only in fast mode.
  resume.layout_recorded = RecordedValue(checkpoint.metadata, "dtlab.math") == "fast" && !recorded.count("dtlab.math");
  for (const char* key : kChangeableSettings) {
    const auto saved = RecordedValue(checkpoint.metadata, key), now = RecordedValue(recorded, key);
    if (!saved || !now || *saved == *now) continue;  // one side does not record it (exact mode), or no change
    resume.changes.push_back({std::string(key).substr(6), Printable(*saved), *now});
    const std::string_view setting(key);
    resume.data_order_changed |= setting == "dtlab.seed" || setting == "dtlab.shuffle_buffer" || setting == "dtlab.dataset";
  }
  // The checkpoint's global batch: recorded since the virtual cluster; before,
  // one device's batch_per_replica; unknown, this run's (the position stays).
  DTLAB_ASSIGN_OR_RETURN(auto global_batch, RecordedCount(checkpoint, "dtlab.global_batch", path));
  DTLAB_ASSIGN_OR_RETURN(auto batch_per_replica, RecordedCount(checkpoint, "dtlab.batch_per_replica", path));
  DTLAB_ASSIGN_OR_RETURN(auto replicas, RecordedCount(checkpoint, "dtlab.replicas", path));
  resume.global_batch = config.global_batch_size();
  resume.checkpoint_global_batch = global_batch.value_or(
      batch_per_replica ? *batch_per_replica * replicas.value_or(1) : resume.global_batch);
  resume.checkpoint_step_in_epoch = state.step_in_epoch;
  resume.epoch_examples = epoch_examples;
  // On the same data set, the checkpoint's position must lie within its epoch.
  const bool dataset_changed = std::any_of(resume.changes.begin(), resume.changes.end(),
                                           [](const ResumeReport::Change& c) { return c.setting == "dataset"; });
  const std::int64_t checkpoint_batches =
      epoch_examples / resume.checkpoint_global_batch + (epoch_examples % resume.checkpoint_global_batch != 0);
  if (!dataset_changed && state.step_in_epoch > checkpoint_batches)
    return Status::Corruption(path + ": progress/step_in_epoch is " + std::to_string(state.step_in_epoch) +
                              ", but an epoch of " + std::to_string(epoch_examples) + " examples at the checkpoint's "
                              "global batch " + std::to_string(resume.checkpoint_global_batch) + " has " +
                              std::to_string(checkpoint_batches) + " batches; the checkpoint is damaged or was not "
                              "written by dtlab (delete it, or use another --checkpoint-dir)");
  resume.position = MapEpochPosition(state.step_in_epoch, resume.checkpoint_global_batch, resume.global_batch,
                                     epoch_examples);
  return resume;
}

// Where a worker other than the chief writes its copy of a checkpoint directory
// DIR/NAME: DIR/workertemp_RANK/NAME (the multi-worker tutorial's write_filepath).
std::string WorkerTempDir(const std::string& directory, std::int32_t rank) {
  std::filesystem::path path(directory);
  if (!path.has_filename()) path = path.parent_path();  // "dir/" -> "dir"
  return (path.parent_path() / ("workertemp_" + std::to_string(rank)) / path.filename()).string();
}

struct TestMetrics {
  float loss = 0, accuracy = 0;
  std::int64_t examples = 0;
};

// The tutorial's test_step over the whole test set: Mean of per-example losses,
// SparseCategoricalAccuracy, batch by batch.
TestMetrics EvaluateTestSet(BatchRunner& runner, const ParameterList<float>& params, const ImageDataset& test,
                            std::int64_t batch_size, MathMode math) {
  Pipeline pipeline(test.count);
  (void)pipeline.Batch(batch_size);  // batch_size >= 1 was validated
  MeanMetric loss;
  ExactMeanMetric exact_loss;  // exact mode: the mean does not depend on the batch size either
  SparseCategoricalAccuracy accuracy;
  Tensor<float> images;
  std::vector<std::int32_t> labels, predictions;
  std::vector<float> losses;
  for (const auto& batch : pipeline.Iterate(0)) {
    GatherBatch(test, batch, images, labels);
    losses.resize(labels.size());
    predictions.resize(labels.size());
    runner.Evaluate(params, images, labels, losses, predictions, math);
    if (math == MathMode::kExact)
      exact_loss.UpdateState(losses);
    else
      loss.UpdateState(losses);
    accuracy.UpdateState(labels, predictions);
  }
  return {math == MathMode::kExact ? exact_loss.Result() : loss.Result(), accuracy.Result(), test.count};
}

std::string MetricsCsvPath(const std::string& directory) { return directory + "/metrics.csv"; }

// Appends one epoch's line to metrics.csv, with the header when the file is new
// or empty. A metrics.csv that is not a regular file (a FIFO, a device, a symlink
// loop) is refused before training starts (Train), so no work is lost to it.
Status AppendMetricsCsv(const std::string& directory, const EpochReport& r) {
  char line[256];
  std::snprintf(line, sizeof line, "%lld,%.9g,%.9g,%.9g,%.9g,%.9g,%.3f,%lld\n", static_cast<long long>(r.epoch),
                r.learning_rate, r.train_loss, r.train_accuracy, r.test_loss, r.test_accuracy, r.seconds,
                static_cast<long long>(r.steps));
  const std::string header = "epoch,learning_rate,train_loss,train_accuracy,test_loss,test_accuracy,seconds,steps\n";
  const std::string path = MetricsCsvPath(directory);
  struct stat info;
  const bool fresh = ::stat(path.c_str(), &info) != 0 || info.st_size == 0;
  return AppendToRegularFile(path, fresh ? header + line : std::string(line), "metrics file");
}

// --dump-step: the weights before the step, its global batch and its gradients.
Status DumpStep(const TrainConfig& config, const Sequential<float>& model, const ParameterList<float>& params,
                const ParameterList<float>& grads, const Tensor<float>& images, std::span<const std::int32_t> labels,
                float loss, float learning_rate, std::int64_t step, std::span<const std::int64_t> replica_batch_sizes) {
  SafetensorsFile file;
  file.metadata = RecordedSettings(config);
  file.metadata["dtlab.step"] = std::to_string(step);
  file.metadata["dtlab.learning_rate"] = std::to_string(learning_rate);
  file.metadata["dtlab.l2"] = "1e-05";
  // What each replica computed, so a peer can recompute the step replica by replica.
  file.metadata["dtlab.loss"] = config.cluster.LossCodeText(config.global_batch_size());
  file.metadata["dtlab.convention"] = std::string(ConventionName(config.cluster.convention));
  file.metadata["dtlab.loss_denominator"] = std::string(LossDenominatorName(config.cluster.denominator));
  file.metadata["dtlab.loss_reduction"] = std::string(LossReductionName(config.cluster.reduction));
  file.metadata["dtlab.keras"] = std::string(KerasVersionName(config.cluster.keras));
  file.metadata["dtlab.num_replicas_in_sync"] = std::to_string(config.cluster.replicas);
  std::string sizes;
  for (const std::int64_t b : replica_batch_sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(b);
  file.metadata["dtlab.replica_batch_sizes"] = sizes;
  const auto& specs = model.parameters();
  for (std::size_t i = 0; i < specs.size(); ++i) DTLAB_RETURN_IF_ERROR(file.Add("weights/" + specs[i].name, params[i]));
  DTLAB_RETURN_IF_ERROR(file.Add("batch/images", images));
  DTLAB_RETURN_IF_ERROR(file.Add("batch/labels", labels, Shape{static_cast<std::int64_t>(labels.size())}));
  for (std::size_t i = 0; i < specs.size(); ++i) DTLAB_RETURN_IF_ERROR(file.Add("gradients/" + specs[i].name, grads[i]));
  DTLAB_RETURN_IF_ERROR(file.Add("loss", std::span<const float>(&loss, 1), Shape{}));
  return WriteFileAtomically(config.dump_dir + "/step-" + std::to_string(step) + ".safetensors",
                             SerializeSafetensors(file));
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
                                     std::to_string(kMaxGlobalBatch) + "; use a smaller --batch-per-replica or "
                                     "fewer --replicas");
  }
  if (max_steps == 0 || max_steps < -1)
    return Status::InvalidArgument("--steps must be at least 1, got " + std::to_string(max_steps));
  if (checkpoint_every < 0)
    return Status::InvalidArgument("--checkpoint-every must be positive, got " + std::to_string(checkpoint_every));
  if (backup_every < 0)
    return Status::InvalidArgument("--backup-every must be positive, got " + std::to_string(backup_every));
  if (!backup_dir.empty() && cluster.strategy == StrategyKind::kParameterServer && backup_every > 0)
    return Status::InvalidArgument("parameter_server backs up at the end of epochs only; drop --backup-every");
  auto canonical = [](const std::string& directory) {  // "dir/" and "dir" are one directory
    std::error_code ec;  // an unreadable path is compared as written
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
  if (trace_steps < 1) return Status::InvalidArgument("--trace-steps must be at least 1");
  if (cluster.strategy == StrategyKind::kParameterServer && cluster.check_reference)
    return Status::InvalidArgument("--check-reference compares synchronous steps with one device; parameter_server "
                                   "updates are asynchronous (each is checked against a sequential replay of the "
                                   "same updates in tests/unit/parameter_server_test.cc)");
  if (cluster.strategy == StrategyKind::kParameterServer && checkpoint_every > 0)
    return Status::InvalidArgument("parameter_server checkpoints at the end of epochs only (its workers' in-flight "
                                   "steps belong to no state); drop --checkpoint-every");
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

EpochPosition MapEpochPosition(std::int64_t step_in_epoch, std::int64_t checkpoint_global_batch,
                               std::int64_t global_batch, std::int64_t epoch_examples) {
  EpochPosition position;
  // step_in_epoch x checkpoint_global_batch, capped at the epoch (the last batch may be short).
  position.examples_consumed = step_in_epoch > epoch_examples / checkpoint_global_batch
                                   ? epoch_examples
                                   : std::min(step_in_epoch * checkpoint_global_batch, epoch_examples);
  if (global_batch == checkpoint_global_batch) {
    position.step_in_epoch = step_in_epoch;
    return position;
  }
  // Round up: the next batch starts at or after the first example not yet taken.
  const std::int64_t consumed = position.examples_consumed;
  position.step_in_epoch = consumed / global_batch + (consumed % global_batch != 0 ? 1 : 0);
  const std::int64_t next = position.step_in_epoch <= epoch_examples / global_batch
                                ? position.step_in_epoch * global_batch
                                : epoch_examples;
  position.examples_skipped = std::min(next, epoch_examples) - consumed;
  return position;
}

std::int64_t LastStep(const TrainConfig& config, std::int64_t train_examples) {
  const std::int64_t batch = std::max<std::int64_t>(config.global_batch_size(), 1);
  const std::int64_t per_epoch = config.drop_remainder ? train_examples / batch : (train_examples + batch - 1) / batch;
  const std::int64_t all = CheckedMultiply(per_epoch, config.epochs).value_or(std::numeric_limits<std::int64_t>::max());
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
    return Status::InvalidArgument("--dump-step " + std::to_string(config.dump_step) + " is never reached: the run "
                                   "ends after step " + std::to_string(last) + " (" + limit + "); give a step from 1 "
                                   "to " + std::to_string(last) + " or raise --steps");
  for (const FaultSpec& fault : config.cluster.faults)
    if (fault.step > last)
      return Status::InvalidArgument("fault " + FaultSpecText(fault) + ": step=" + std::to_string(fault.step) +
                                     " is never reached: the run ends after step " + std::to_string(last) + " (" +
                                     limit + "); step must be from 1 to " + std::to_string(last));
  return Status::Ok();
}

// Refuses, before allocating, a run whose replicas cannot fit in memory.
Status CheckFitsInMemory(const TrainConfig& config, const Sequential<float>& model, const ImageDataset& train) {
  RunMemoryInput input;
  input.parameter_values = model.num_parameter_values();
  DTLAB_ASSIGN_OR_RETURN(auto optimizer, MakeOptimizer(config.optimizer, OptimizerOptions{}));
  input.optimizer_slots = static_cast<std::int64_t>(optimizer->SlotNames().size()) + (config.momentum != 0 ? 1 : 0);
  const std::int32_t workers = config.worker_group != nullptr ? config.worker_group->size() : 1;
  input.replicas = config.cluster.replicas / std::max(workers, 1);
  input.exact = config.cluster.math == MathMode::kExact;
  input.central_storage = config.cluster.strategy == StrategyKind::kCentralStorage;
  input.global_batch = std::min(config.global_batch_size(), train.count);
  input.example_values = train.height * train.width * train.channels;
  Shape shape = model.example_shape();
  for (const auto& layer : model.layers()) {
    shape = layer->OutputShape(shape);
    input.activation_values_per_example += NumElements(shape);
  }
  input.chunk_size = config.chunk_size;
  input.threads = tbb::this_task_arena::max_concurrency();
  input.all_reduce = config.cluster.all_reduce;
  return CheckRunFitsInMemory(EstimateRunMemory(input), input, AvailableMemoryForRun());
}

}  // namespace

StatusOr<TrainReport> Train(const TrainConfig& config, const TrainTestData& data, TrainObserver* observer) {
  DTLAB_RETURN_IF_ERROR(config.Validate());
  TrainObserver null_observer;
  if (!observer) observer = &null_observer;
  const ImageDataset& train = data.train;
  DTLAB_ASSIGN_OR_RETURN(auto model, MakeModel<float>(config.model, {train.height, train.width, train.channels},
                                                      train.num_classes));
  DTLAB_RETURN_IF_ERROR(CheckStepsReachable(config, train.count));
  DTLAB_RETURN_IF_ERROR(CheckFitsInMemory(config, *model, train));
  // Output paths are checked before training, not discovered unwritable at its end.
  if (!config.trace_path.empty()) DTLAB_RETURN_IF_ERROR(CheckOutputPath(config.trace_path, "--trace"));
  if (!config.dump_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(config.dump_dir, ec);
    if (ec) return Status::IOError("cannot create --dump-dir " + config.dump_dir + ": " + ec.message());
  }
  OptimizerOptions optimizer_options;
  optimizer_options.momentum = config.momentum;
  TrainingState state;
  DTLAB_ASSIGN_OR_RETURN(state.optimizer, MakeOptimizer(config.optimizer, optimizer_options));
  state.params = model->InitialParameters(config.seed);
  state.optimizer->Build(state.params);

  // Resume from the checkpoint directory when it holds this run's checkpoint.
  TrainReport report;
  report.model_summary = model->Summary();
  std::optional<CheckpointManager> manager, backup;
  std::map<std::string, std::string> recorded = RecordedSettings(config);
  recorded["dtlab.dataset"] = data.name;
  // Multi-worker: the chief (rank 0) writes the real directories; every worker
  // reads them, so they must be on a file system all workers share.
  WorkerGroup* group = config.worker_group;
  const bool chief = group == nullptr || group->rank() == 0;
  const std::string backup_chief_dir = config.backup_dir.empty() ? "" : (std::filesystem::path(config.backup_dir) / "chief").string();
  const bool async = config.cluster.strategy == StrategyKind::kParameterServer;
  // Restores `m`'s latest checkpoint, if any, after checking it fits this run's
  // model and optimizer; the rest of the configuration may differ (TF restores a
  // checkpoint under any strategy), and report.resume says what changed.
  auto restore = [&](CheckpointManager& m, const char* option) -> Status {
    DTLAB_ASSIGN_OR_RETURN(auto latest, m.LatestPath());
    if (!latest) return Status::Ok();
    DTLAB_ASSIGN_OR_RETURN(SafetensorsFile checkpoint, m.RestoreLatest());
    const std::string where = std::string(option) + " " + m.directory();
    DTLAB_RETURN_IF_ERROR(CheckCheckpointFits(checkpoint, *model, *state.optimizer, config, where, *latest));
    DTLAB_RETURN_IF_ERROR(RestoreCheckpoint(checkpoint, *model, state).WithContext(*latest));
    DTLAB_ASSIGN_OR_RETURN(ResumeReport resume,
                           DescribeResume(checkpoint, *latest, recorded, config, *model, state, train.count));
    // Asynchronous workers run whole epochs (their in-flight steps belong to no
    // state), so parameter_server cannot start in the middle of one.
    if (async && state.step_in_epoch > 0 && state.epoch < config.epochs)
      return Status::InvalidArgument(
          where + " holds a checkpoint taken in the middle of epoch " + std::to_string(state.epoch + 1) + " (after " +
          std::to_string(state.step_in_epoch) + " batches), and parameter_server resumes at the start of an epoch "
          "only: finish epoch " + std::to_string(state.epoch + 1) + " first with a synchronous strategy (e.g. "
          "--strategy mirrored --epochs " + std::to_string(state.epoch + 1) + "), then resume with parameter_server");
    state.step_in_epoch = resume.position.step_in_epoch;
    report.resumed_from_step = state.step;
    report.resume = std::move(resume);
    return Status::Ok();
  };
  for (const std::string& dir : {config.checkpoint_dir, backup_chief_dir}) {
    if (dir.empty()) continue;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status::IOError("cannot create " + dir + ": " + ec.message());
  }
  if (!config.backup_dir.empty()) {
    backup.emplace(backup_chief_dir, 1);
    DTLAB_RETURN_IF_ERROR(restore(*backup, "--backup-dir"));
  }
  if (!config.checkpoint_dir.empty()) {
    manager.emplace(config.checkpoint_dir, config.max_to_keep);
    if (report.resumed_from_step < 0) DTLAB_RETURN_IF_ERROR(restore(*manager, "--checkpoint-dir"));
  }
  // One writer per directory: a second training into it is refused here, before
  // it could sweep away the first one's temporary files (core/checkpoint_manager.h).
  // Taken after the restore (which only reads), so a refused resume or a bad
  // metrics.csv leaves nothing behind, not even a lock file.
  std::vector<ExclusiveFileLock> writer_locks;
  if (chief) {
    if (!config.checkpoint_dir.empty())
      DTLAB_RETURN_IF_ERROR(CheckAppendPath(MetricsCsvPath(config.checkpoint_dir), "metrics file"));
    for (const std::string& dir : {config.checkpoint_dir, backup_chief_dir}) {
      if (dir.empty()) continue;
      DTLAB_ASSIGN_OR_RETURN(ExclusiveFileLock lock, CheckpointManager(dir, 0).LockForWriting());
      writer_locks.push_back(std::move(lock));
    }
  }
  if (group != nullptr) {
    // Every worker must resume from the same step (or none).
    std::vector<std::int64_t> resumed(static_cast<std::size_t>(group->size()));
    std::vector<std::size_t> one(resumed.size(), 1);
    DTLAB_RETURN_IF_ERROR(group->AllGatherValues(std::span<const std::int64_t>(&report.resumed_from_step, 1),
                                                 std::span<std::int64_t>(resumed), one, "agreeing on where to resume", 0));
    for (std::size_t w = 0; w < resumed.size(); ++w)
      if (resumed[w] != resumed[0])
        return Status::InvalidArgument(
            "rank " + std::to_string(w) + " " +
            (resumed[w] < 0 ? std::string("found no checkpoint") : "would resume from step " + std::to_string(resumed[w])) +
            " but rank 0 " + (resumed[0] < 0 ? std::string("found none") : "resumes from step " + std::to_string(resumed[0])) +
            ": every worker reads the chief's checkpoint directory, so it must be on a file system all machines share "
            "(docs/mpi.md)");
  }

  // The engine: synchronous replicas (Cluster) or asynchronous workers and parameter
  // servers (ParameterServerCluster); only the step loops below need to know which.
  std::unique_ptr<TrainingEngine> engine;
  Cluster* cluster = nullptr;
  ParameterServerCluster* servers = nullptr;
  const double flops_per_example = 6.0 * static_cast<double>(model->num_parameter_values());
  if (async) {
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
    DTLAB_ASSIGN_OR_RETURN(auto made, ParameterServerCluster::Create(*model, options, config.optimizer,
                                                                     optimizer_options, state.params, config.chunk_size,
                                                                     group));
    servers = made.get();
    engine = std::move(made);
  } else {
    DTLAB_ASSIGN_OR_RETURN(auto made, Cluster::Create(*model, config.cluster, config.optimizer, optimizer_options,
                                                      state.params, config.chunk_size, group));
    cluster = made.get();
    engine = std::move(made);
  }
  std::unique_ptr<ComputeBackend> compute;
  if (config.make_compute_backend) {
    DTLAB_ASSIGN_OR_RETURN(compute, config.make_compute_backend(*model));
    if (compute && async)
      return Status::InvalidArgument("--backend: the parameter-server strategy runs on the CPU only; the device "
                                     "backends run the synchronous strategies");
    if (compute) cluster->set_compute_backend(compute.get());
  }
  if (report.resumed_from_step >= 0) engine->ImportState(state);
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
  // Parameter-server workers each read their own shard, as the PS tutorial's
  // dataset_fn does with distribute_datasets_from_function.
  // --input function: the dataset_fn of the tutorials, batched by
  // context.get_per_replica_batch_size(GLOBAL_BATCH_SIZE) (a ValueError in TF when N
  // does not divide the global batch).
  auto make_dataset = [&]() -> StatusOr<DistributedDataset> {
    if (!async && config.input == InputApi::kDistributeDataset) return DistributedDataset::DistributeDataset(input);
    return DistributedDataset::DistributeDatasetsFromFunction(
        config.cluster.workers, async ? 1 : config.cluster.replicas_per_worker(),
        [&](const InputContext& context) -> StatusOr<Pipeline> {
          std::int64_t per_replica = config.batch_per_replica;
          if (!async) {
            DTLAB_ASSIGN_OR_RETURN(per_replica, context.GetPerReplicaBatchSize(config.global_batch_size()));
          }
          Pipeline pipeline(train.count);
          DTLAB_RETURN_IF_ERROR(pipeline.Shuffle(input.shuffle_buffer, config.seed));
          DTLAB_RETURN_IF_ERROR(pipeline.Shard(context.num_input_pipelines, context.input_pipeline_id));
          DTLAB_RETURN_IF_ERROR(pipeline.Batch(per_replica, config.drop_remainder));
          return pipeline;
        });
  };
  DTLAB_ASSIGN_OR_RETURN(DistributedDataset dataset, make_dataset());
  report.input_description = dataset.Describe();
  DTLAB_ASSIGN_OR_RETURN(Topology topology, Topology::Create(config.topology, config.cluster.replicas, config.link));
  SimulatedTimeline timeline(config.cluster.replicas);
  std::vector<CollectiveRecord> traced_collectives;
  std::vector<std::vector<double>> traced_compute;  // per traced step, each replica's compute seconds
  if (config.cluster.check_reference) report.reference_check.emplace();
  observer->OnStart(report.model_summary, report.resumed_from_step);
  if (report.resume) observer->OnResume(*report.resume);
  observer->OnInput(report.input_description);

  const std::int64_t global_batch = config.global_batch_size();
  BatchRunner evaluator(*model, config.chunk_size);
  std::int64_t images_trained = 0;
  double train_seconds = 0;
  const float default_rate = state.optimizer->default_learning_rate();

  std::int64_t last_saved_step = report.resumed_from_step;
  // Saves the state into `m` (the chief) or into this worker's temporary directory,
  // which it then deletes (the multi-worker tutorial's write_filepath); every
  // worker takes part, and none goes on before all have saved.
  auto save_into = [&](CheckpointManager& m, const std::string& worker_temp, std::int64_t number,
                       std::string* path) -> Status {
    const std::map<std::string, std::string>& metadata = recorded;
    engine->ExportState(state);
    if (chief) {
      DTLAB_RETURN_IF_ERROR(m.Save(MakeCheckpoint(*model, state, metadata), number, path));
    } else {
      std::error_code ec;
      std::filesystem::create_directories(worker_temp, ec);
      if (ec) return Status::IOError("cannot create " + worker_temp + ": " + ec.message());
      CheckpointManager temp(worker_temp, 1);
      DTLAB_RETURN_IF_ERROR(temp.Save(MakeCheckpoint(*model, state, metadata), number, path));
      std::filesystem::remove_all(worker_temp, ec);
      std::filesystem::remove(std::filesystem::path(worker_temp).parent_path(), ec);  // workertemp_RANK, if empty
    }
    if (group != nullptr) DTLAB_RETURN_IF_ERROR(group->Barrier("saving checkpoint " + std::to_string(number), state.step));
    return Status::Ok();
  };
  auto save = [&](std::int64_t number) -> Status {
    if (!manager) return Status::Ok();
    std::string path;
    DTLAB_RETURN_IF_ERROR(save_into(*manager, group ? WorkerTempDir(config.checkpoint_dir, group->rank()) : "", number, &path));
    report.last_checkpoint = path;
    last_saved_step = state.step;
    observer->OnCheckpoint(path);
    return Status::Ok();
  };
  auto save_backup = [&]() -> Status {
    if (!backup) return Status::Ok();
    std::string path;
    const std::string temp = group ? (std::filesystem::path(config.backup_dir) /
                                      ("workertemp_" + std::to_string(group->rank()))).string()
                                   : "";
    return save_into(*backup, temp, state.step, &path);
  };

  bool stop = config.max_steps >= 0 && state.step >= config.max_steps;
  for (; state.epoch < config.epochs && !stop; ++state.epoch) {
    const float learning_rate = LearningRateFor(config, default_rate, state.epoch + 1);
    const auto steps = dataset.Iterate(state.epoch);
    const auto steps_in_epoch = static_cast<std::int64_t>(steps.size());
    observer->OnEpochBegin(state.epoch + 1, learning_rate, steps_in_epoch);
    const auto epoch_start = Clock::now();
    std::int64_t steps_this_epoch = 0;
    if (async) {
      // Each worker's batches of this epoch, in order; one update per batch.
      std::vector<std::vector<std::vector<std::int64_t>>> per_worker(static_cast<std::size_t>(config.cluster.workers));
      std::int64_t updates_in_epoch = 0;
      for (const auto& step : steps)
        for (std::size_t w = 0; w < step.size(); ++w)
          if (!step[w].empty()) {
            per_worker[w].push_back(step[w]);
            ++updates_in_epoch;
          }
      const std::int64_t step_before = state.step;
      DTLAB_RETURN_IF_ERROR(servers->RunEpoch(
          train, per_worker, state.epoch, learning_rate, config.max_steps,
          [&](const ParameterServerUpdate& u) {
            ++state.step;
            ++steps_this_epoch;
            images_trained += u.examples;
            state.train_loss_total += u.loss;
            state.train_batches += 1.0f;
            report.staleness.push_back(u.staleness);
            observer->OnStep(steps_this_epoch, updates_in_epoch, state.train_loss_total / state.train_batches,
                             servers->MergedAccuracy().Result());
          }));
      if (group != nullptr) {  // across ranks, only the chief saw the updates: every rank now knows their count
        state.step = servers->version();
        steps_this_epoch = state.step - step_before;
      }
      report.collective_bytes += servers->message_log().TotalBytes();
      servers->message_log().Clear();
      if (!std::isfinite(state.train_loss_total))
        return Status::Runtime("the loss became non-finite in epoch " + std::to_string(state.epoch + 1) +
                               "; try a smaller --lr");
      if (config.max_steps >= 0 && state.step >= config.max_steps &&
          (steps_this_epoch < updates_in_epoch || group != nullptr))
        stop = true;
      state.step_in_epoch = steps_in_epoch;
    }
    for (; !async && state.step_in_epoch < steps_in_epoch; ++state.step_in_epoch) {
      if (config.max_steps >= 0 && state.step >= config.max_steps) {
        stop = true;
        break;
      }
      const bool dump = state.step + 1 == config.dump_step;
      const ParameterList<float> weights_before = dump ? cluster->variables() : ParameterList<float>{};
      ParameterList<float> reduced_gradient;
      DTLAB_ASSIGN_OR_RETURN(StepResult result,
                             cluster->TrainStep(train, steps[static_cast<std::size_t>(state.step_in_epoch)], global_batch,
                                                learning_rate, state.step + 1,
                                                dump || observer->WantsReducedGradient() ? &reduced_gradient : nullptr));
      if (!std::isfinite(result.loss)) {
        const std::string where = " at step " + std::to_string(state.step + 1) + " (epoch " +
                                  std::to_string(state.epoch + 1) + ")";
        for (std::size_t r = 0; r < result.replica_losses.size(); ++r)
          if (std::isnan(result.replica_losses[r]) && result.replica_batch_sizes[r] == 0)
            return Status::Runtime("the loss became NaN" + where + LossCode::EmptyReplicaNanCause(r));
        return Status::Runtime("the loss became " + std::string(std::isnan(result.loss) ? "NaN" : "infinite") + where +
                               "; try a smaller --lr");
      }
      if (dump) {
        std::vector<std::int64_t> indices;
        for (const auto& replica : steps[static_cast<std::size_t>(state.step_in_epoch)])
          indices.insert(indices.end(), replica.begin(), replica.end());
        Tensor<float> images;
        std::vector<std::int32_t> labels;
        GatherBatch(train, indices, images, labels);
        DTLAB_RETURN_IF_ERROR(DumpStep(config, *model, weights_before, reduced_gradient, images, labels, result.loss,
                                       learning_rate, state.step + 1, result.replica_batch_sizes));
      }
      if (result.check) {
        report.reference_check->Add(*result.check);
        if (!result.check->within_bound) observer->OnReferenceFailure(*result.check);
      }
      // Simulated time: every replica computes its share, then the step's collectives.
      const bool traced = !config.trace_path.empty() && state.step < config.trace_steps;
      if (traced) traced_compute.emplace_back();
      StepRecord record;
      for (std::int32_t r = 0; r < config.cluster.replicas; ++r) {
        double seconds = EstimateCompute(
            flops_per_example * static_cast<double>(result.replica_batch_sizes[static_cast<std::size_t>(r)]),
            config.device_flops_per_second);
        if (!result.straggler_seconds.empty()) seconds += result.straggler_seconds[static_cast<std::size_t>(r)];
        DTLAB_RETURN_IF_ERROR(timeline.AddCompute(state.step + 1, r, seconds));
        if (traced) traced_compute.back().push_back(seconds);
        record.compute_seconds.push_back(seconds);
      }
      for (const CollectiveRecord& collective : cluster->message_log().collectives()) {
        DTLAB_ASSIGN_OR_RETURN(CollectiveCost cost, EstimateCollective(collective, topology));
        timeline.AddCollective(cost);
        for (const Message& m : collective.messages) report.collective_bytes += m.bytes;
        if (traced) traced_collectives.push_back(collective);
        record.collectives.push_back(std::move(cost));
      }
      cluster->message_log().Clear();
      ++state.step;
      ++steps_this_epoch;
      images_trained += result.examples;
      state.train_loss_total += result.loss;
      state.train_batches += 1.0f;
      const SparseCategoricalAccuracy accuracy = engine->MergedAccuracy();
      observer->OnStep(state.step_in_epoch + 1, steps_in_epoch, state.train_loss_total / state.train_batches,
                       accuracy.Result());
      record.step = state.step;
      record.epoch = state.epoch + 1;
      record.mean_loss = state.train_loss_total / state.train_batches;
      record.accuracy = accuracy.Result();
      record.result = &result;
      record.examples = &steps[static_cast<std::size_t>(state.step_in_epoch)];
      record.variables = &engine->variables();
      if (!reduced_gradient.empty()) record.reduced_gradient = &reduced_gradient;
      observer->OnTrainStep(record);
      const bool checkpoint = config.checkpoint_every > 0 && state.step % config.checkpoint_every == 0;
      const bool backup_now = backup && config.backup_every > 0 && state.step % config.backup_every == 0;
      if (checkpoint || backup_now) {
        ++state.step_in_epoch;  // the checkpoint resumes after this batch
        Status saved = checkpoint ? save(state.step) : Status::Ok();
        if (saved.ok() && backup_now) saved = save_backup();
        --state.step_in_epoch;
        DTLAB_RETURN_IF_ERROR(saved);
      }
    }
    const double epoch_train_seconds = SecondsSince(epoch_start);
    train_seconds += epoch_train_seconds;
    if (steps_this_epoch == 0 && stop) break;
    if (!async && !cluster->ReplicasInSync())
      return Status::Runtime("the replicas' mirrored variables diverged by epoch " + std::to_string(state.epoch + 1) +
                             "; this is a bug in dtlab, please report it");

    observer->OnEvaluating();
    // Across MPI ranks only the chief reports, so only it evaluates.
    const TestMetrics test = chief ? EvaluateTestSet(evaluator, engine->variables(), data.test, global_batch,
                                                     config.cluster.math)
                                   : TestMetrics{};
    EpochReport epoch_report;
    epoch_report.epoch = state.epoch + 1;
    epoch_report.learning_rate = learning_rate;
    epoch_report.train_loss = state.train_batches > 0 ? state.train_loss_total / state.train_batches : 0.0f;
    epoch_report.train_accuracy = engine->MergedAccuracy().Result();
    epoch_report.test_loss = test.loss;
    epoch_report.test_accuracy = test.accuracy;
    epoch_report.seconds = epoch_train_seconds;
    epoch_report.steps = steps_this_epoch;
    report.epochs.push_back(epoch_report);
    observer->OnEpochEnd(epoch_report);
    if (manager && chief) DTLAB_RETURN_IF_ERROR(AppendMetricsCsv(config.checkpoint_dir, epoch_report));
    if (stop) break;

    // The next epoch starts afresh; the tutorial checkpoints after every 2nd epoch.
    state.step_in_epoch = 0;
    state.train_loss_total = state.train_batches = 0.0f;
    engine->ResetMetrics();
    const bool epoch_checkpoint = config.checkpoint_every == 0 && state.epoch % 2 == 0;
    if (epoch_checkpoint || (backup && config.backup_every == 0)) {
      ++state.epoch;
      Status saved = epoch_checkpoint ? save(state.step) : Status::Ok();
      if (saved.ok() && config.backup_every == 0) saved = save_backup();
      --state.epoch;
      DTLAB_RETURN_IF_ERROR(saved);
    }
  }
  // Always leave the final state behind, so eval and resume see the trained model.
  // Asynchronous workers cannot resume in the middle of an epoch (their in-flight
  // steps are not part of any state), so parameter_server saves at epoch ends only.
  const bool at_epoch_boundary = state.step_in_epoch == 0 || state.epoch >= config.epochs;
  if (manager && state.step != last_saved_step && (!async || at_epoch_boundary)) DTLAB_RETURN_IF_ERROR(save(state.step));
  // BackupAndRestore deletes its backup once training has ended normally.
  if (backup && chief) {
    std::error_code ec;
    std::filesystem::remove_all(backup_chief_dir, ec);
    if (ec) return Status::IOError("cannot delete the backup " + backup_chief_dir + ": " + ec.message());
  }

  report.steps = state.step;
  report.seconds = train_seconds;
  report.images_per_second = train_seconds > 0 ? static_cast<double>(images_trained) / train_seconds : 0.0;
  report.simulated_seconds = async ? servers->simulated_seconds() : timeline.total_seconds();
  report.simulated_collective_seconds = async ? 0.0 : timeline.collective_seconds();
  report.weights_digest = WeightsDigest(engine->variables());
  if (!report.epochs.empty()) {
    report.final_test_accuracy = report.epochs.back().test_accuracy;
    report.final_test_loss = report.epochs.back().test_loss;
  }
  if (!config.trace_path.empty() && async) {
    // One track per worker: each update's span from pull to push, named with its staleness.
    TraceWriter writer;
    for (const ParameterServerUpdate& u : servers->updates()) {
      if (u.update > config.trace_steps * config.cluster.workers) break;
      const double duration = u.finish_seconds - u.start_seconds;
      writer.AddSpan(u.worker, "update " + std::to_string(u.update) + " (staleness " + std::to_string(u.staleness) + ")",
                     "compute", u.start_seconds, duration, {{"staleness", u.staleness}, {"examples", u.examples}});
    }
    DTLAB_RETURN_IF_ERROR(writer.WriteFile(config.trace_path));
  } else if (!config.trace_path.empty()) {
    // The trace shows the first steps: their compute and every phase and message.
    SimulatedTimeline trace_timeline(config.cluster.replicas);
    for (std::size_t step = 0; step < traced_compute.size(); ++step)
      for (std::int32_t r = 0; r < config.cluster.replicas; ++r)
        DTLAB_RETURN_IF_ERROR(trace_timeline.AddCompute(static_cast<std::int64_t>(step) + 1 +
                                                            std::max<std::int64_t>(report.resumed_from_step, 0),
                                                        r, traced_compute[step][static_cast<std::size_t>(r)]));
    for (const CollectiveRecord& record : traced_collectives) {
      DTLAB_ASSIGN_OR_RETURN(CollectiveCost cost, EstimateCollective(record, topology));
      trace_timeline.AddCollective(cost);
    }
    TraceWriter writer;
    DTLAB_RETURN_IF_ERROR(AddTimelineToTrace(trace_timeline, traced_collectives, writer));
    DTLAB_RETURN_IF_ERROR(writer.WriteFile(config.trace_path));
  }
  return report;
}

StatusOr<EvalReport> EvaluateCheckpoint(const std::string& checkpoint_dir, const TrainTestData& data,
                                        std::int64_t batch_size) {
  CheckpointManager manager(checkpoint_dir, 0);
  DTLAB_ASSIGN_OR_RETURN(auto latest, manager.LatestPath());
  if (!latest) return Status::NotFound("no checkpoint in " + checkpoint_dir + " (train with --checkpoint-dir first)");
  DTLAB_ASSIGN_OR_RETURN(SafetensorsFile checkpoint, manager.RestoreLatest());
  auto model_name = checkpoint.metadata.find("dtlab.model");
  if (model_name == checkpoint.metadata.end())
    return Status::Corruption(*latest + ": no dtlab.model in the metadata; not a dtlab training checkpoint");
  const ImageDataset& test = data.test;
  DTLAB_ASSIGN_OR_RETURN(auto model, MakeModel<float>(model_name->second, {test.height, test.width, test.channels},
                                                      test.num_classes));
  auto params = RestoreParameters(checkpoint, *model);
  if (!params.ok()) return params.status().WithContext(*latest);
  if (batch_size <= 0) {
    auto it = checkpoint.metadata.find("dtlab.batch_per_replica");
    batch_size = it == checkpoint.metadata.end() ? 64 : std::max<std::int64_t>(1, std::atoll(it->second.c_str()));
  }
  BatchRunner runner(*model);
  auto math = checkpoint.metadata.find("dtlab.math");
  const MathMode mode = math != checkpoint.metadata.end() && math->second == "exact" ? MathMode::kExact : MathMode::kFast;
  if (batch_size <= 0 && mode == MathMode::kExact) {
    auto it = checkpoint.metadata.find("dtlab.global_batch");
    batch_size = it == checkpoint.metadata.end() ? 64 : std::max<std::int64_t>(1, std::atoll(it->second.c_str()));
  }
  const TestMetrics test_metrics = EvaluateTestSet(runner, *params, test, batch_size, mode);
  EvalReport report;
  report.checkpoint = *latest;
  report.model = model->name();
  if (auto step = checkpoint.GetI64("progress/step"); step.ok() && step->size() == 1) report.step = (*step)[0];
  report.test_loss = test_metrics.loss;
  report.test_accuracy = test_metrics.accuracy;
  report.examples = test_metrics.examples;
  return report;
}

}  // namespace dtlab
