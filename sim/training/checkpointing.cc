#include "sim/training/checkpointing.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <utility>

#include "core/text.h"

namespace dtlab {

// The settings a checkpoint records in its metadata (docs/checkpoints.md). Only
// the model and the optimizer must match for a run to resume (CheckCheckpointFits);
// the others may differ and are reported as changes (DescribeResume). In exact
// mode a run's numbers do not depend on how the global batch is spread over
// replicas, workers or chunks, so that is not recorded: a checkpoint of 3 mirrored
// replicas is byte-identical to one device's.
std::map<std::string, std::string> RecordedSettings(const TrainConfig& config) {
  const GradientAccumulation& accumulation = config.cluster.accumulation;
  // The global batch is the optimizer step's: K micro-batches under gradient
  // accumulation (the position in the epoch counts it). K is layout in exact mode
  // (under the global rule K micro-batches of G give the bits of one step of K x G),
  // so only fast mode records it; the keras rule changes the numbers in both.
  std::map<std::string, std::string> recorded;
  if (config.cluster.math == MathMode::kExact) {
    recorded = {
        {"dtlab.model", config.model},
        {"dtlab.optimizer", config.optimizer},
        {"dtlab.global_batch", std::to_string(config.step_batch_size())},
        {"dtlab.seed", std::to_string(config.seed)},
        {"dtlab.shuffle_buffer", std::to_string(config.shuffle_buffer)},
        {"dtlab.math", "exact"},
    };
  } else {
    recorded = {
        {"dtlab.model", config.model},
        {"dtlab.optimizer", config.optimizer},
        {"dtlab.batch_per_replica", std::to_string(config.batch_per_replica)},
        {"dtlab.global_batch", std::to_string(config.step_batch_size())},
        {"dtlab.seed", std::to_string(config.seed)},
        {"dtlab.shuffle_buffer", std::to_string(config.shuffle_buffer)},
        {"dtlab.chunk_size", std::to_string(config.chunk_size)},
        {"dtlab.strategy", std::string(StrategyName(config.cluster.strategy))},
        {"dtlab.replicas", std::to_string(config.cluster.replicas)},
        {"dtlab.workers", std::to_string(config.cluster.workers)},
    };
    if (accumulation.on()) recorded["dtlab.accumulation_steps"] = std::to_string(accumulation.steps);
  }
  if (accumulation.on() && accumulation.keras())
    recorded["dtlab.accumulation"] = std::string(AccumulationRuleName(accumulation.rule));
  return recorded;
}

namespace {

// The recorded settings a resumed run may change, in the order a change is
// reported. A fast-mode checkpoint has no dtlab.math (it reads "fast").
// dtlab.batch_per_replica is left out: the global batch and the replica count
// say what it did (and under --global-batch it is not the batch a replica got).
constexpr const char* kChangeableSettings[] = {
    "dtlab.dataset",      "dtlab.math",       "dtlab.strategy", "dtlab.replicas",       "dtlab.workers",
    "dtlab.global_batch", "dtlab.chunk_size", "dtlab.seed",     "dtlab.shuffle_buffer", "dtlab.accumulation_steps",
    "dtlab.accumulation",
};

// A setting's value in a checkpoint's metadata (or this run's), with the value an
// absent key stands for: "fast" for the math, and without gradient accumulation
// "global" for its rule and, in fast mode (exact mode does not record it), 1 step.
std::optional<std::string> RecordedValue(const std::map<std::string, std::string>& metadata, const std::string& key) {
  auto it = metadata.find(key);
  if (it != metadata.end()) return it->second;
  if (key == "dtlab.math") return std::string("fast");
  if (key == "dtlab.accumulation") return std::string("global");
  if (key == "dtlab.accumulation_steps" && !metadata.count("dtlab.math")) return std::string("1");
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
Status CheckCheckpointFits(const SafetensorsFile& checkpoint, const Sequential<float>& model,
                           const Optimizer& optimizer, const TrainConfig& config, const std::string& where,
                           const std::string& path) {
  const std::string afresh = ", or use another directory (or delete this one) to start afresh";
  for (const char* key : {"dtlab.model", "dtlab.optimizer"})
    if (!checkpoint.metadata.count(key))
      return Status::Corruption(path + ": no " + key +
                                " in the metadata; not a dtlab training checkpoint (use another "
                                "directory, or delete this one to start afresh)");
  const std::string saved_model = Printable(checkpoint.metadata.at("dtlab.model"));
  const auto saved_json = checkpoint.metadata.find("dtlab.model_json");
  if (saved_json != checkpoint.metadata.end() || !model.description_json().empty()) {
    // Models from files: the same description, wherever the file was read from.
    if (saved_json == checkpoint.metadata.end() || saved_json->second != model.description_json())
      return Status::InvalidArgument(where + " holds a checkpoint of another model (" + saved_model + " there, " +
                                     config.model +
                                     " here, and their descriptions differ): its weights cannot be "
                                     "mapped onto " +
                                     config.model + "; resume with --model " + saved_model + afresh);
  } else if (saved_model != config.model)
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
      return Status::InvalidArgument(where + " holds a checkpoint of another model: it has no variable model/" +
                                     p.name + " of " + config.model + "; resume with the model it was written for" +
                                     afresh);
    if (entry->shape != p.spec.shape)
      return Status::InvalidArgument(where + " holds a checkpoint of another model: its model/" + p.name +
                                     " has shape " + ShapeToString(entry->shape) + " but " + config.model +
                                     " on this data set expects " + ShapeToString(p.spec.shape) +
                                     " (another image size or class count); resume with the --dataset it was "
                                     "trained on" +
                                     afresh);
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
    resume.data_order_changed |=
        setting == "dtlab.seed" || setting == "dtlab.shuffle_buffer" || setting == "dtlab.dataset";
  }
  // The checkpoint's global batch: recorded since the virtual cluster; before,
  // one device's batch_per_replica; unknown, this run's (the position stays).
  DTLAB_ASSIGN_OR_RETURN(auto global_batch, RecordedCount(checkpoint, "dtlab.global_batch", path));
  DTLAB_ASSIGN_OR_RETURN(auto batch_per_replica, RecordedCount(checkpoint, "dtlab.batch_per_replica", path));
  DTLAB_ASSIGN_OR_RETURN(auto replicas, RecordedCount(checkpoint, "dtlab.replicas", path));
  resume.global_batch = config.step_batch_size();
  resume.checkpoint_global_batch =
      global_batch.value_or(batch_per_replica ? *batch_per_replica * replicas.value_or(1) : resume.global_batch);
  resume.checkpoint_step_in_epoch = state.step_in_epoch;
  resume.epoch_examples = epoch_examples;
  // On the same data set, the checkpoint's position must lie within its epoch.
  const bool dataset_changed = std::any_of(resume.changes.begin(), resume.changes.end(),
                                           [](const ResumeReport::Change& c) { return c.setting == "dataset"; });
  const std::int64_t checkpoint_batches =
      epoch_examples / resume.checkpoint_global_batch + (epoch_examples % resume.checkpoint_global_batch != 0);
  if (!dataset_changed && state.step_in_epoch > checkpoint_batches)
    return Status::Corruption(path + ": progress/step_in_epoch is " + std::to_string(state.step_in_epoch) +
                              ", but an epoch of " + std::to_string(epoch_examples) +
                              " examples at the checkpoint's "
                              "global batch " +
                              std::to_string(resume.checkpoint_global_batch) + " has " +
                              std::to_string(checkpoint_batches) +
                              " batches; the checkpoint is damaged or was not "
                              "written by dtlab (delete it, or use another --checkpoint-dir)");
  resume.position =
      MapEpochPosition(state.step_in_epoch, resume.checkpoint_global_batch, resume.global_batch, epoch_examples);
  // In a parameter_server epoch each worker took batches of its own shard (every
  // W-th example of the shuffled order, from its index), not a prefix of the order.
  if (!state.worker_batches.empty()) {
    const auto workers = static_cast<std::int64_t>(state.worker_batches.size());
    const std::int64_t batch =
        batch_per_replica.value_or(std::max<std::int64_t>(resume.checkpoint_global_batch / workers, 1));
    resume.position.examples_consumed = 0;
    resume.position.examples_skipped = 0;
    for (std::int64_t w = 0; w < workers; ++w) {
      const std::int64_t shard = epoch_examples > w ? (epoch_examples - w + workers - 1) / workers : 0;
      const std::int64_t pushed = state.worker_batches[static_cast<std::size_t>(w)];
      resume.position.examples_consumed += pushed > shard / batch ? shard : pushed * batch;
    }
  }
  return resume;
}

// Where a worker other than the chief writes its copy of a checkpoint directory
// DIR/NAME: DIR/workertemp_RANK/NAME (the multi-worker tutorial's write_filepath).
std::string WorkerTempDir(const std::string& directory, std::int32_t rank) {
  std::filesystem::path path(directory);
  if (!path.has_filename()) path = path.parent_path();  // "dir/" -> "dir"
  return (path.parent_path() / ("workertemp_" + std::to_string(rank)) / path.filename()).string();
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

}  // namespace

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
  const std::int64_t next =
      position.step_in_epoch <= epoch_examples / global_batch ? position.step_in_epoch * global_batch : epoch_examples;
  position.examples_skipped = std::min(next, epoch_examples) - consumed;
  return position;
}

RunCheckpoints::RunCheckpoints(const TrainConfig& config, const Sequential<float>& model,
                               const std::string& dataset_name, TrainingState& state, TrainReport& report)
    : config_(config),
      model_(model),
      state_(state),
      report_(report),
      recorded_(RecordedSettings(config)),
      group_(config.worker_group),
      chief_(group_ == nullptr || group_->rank() == 0),
      backup_chief_dir_(config.backup_dir.empty() ? ""
                                                  : (std::filesystem::path(config.backup_dir) / "chief").string()) {
  recorded_["dtlab.dataset"] = dataset_name;
  // A model read from a file is recorded whole: dtlab eval rebuilds it without the
  // file, and a resume matches it by what it is, not by the path it was read from.
  if (!model.description_json().empty()) recorded_["dtlab.model_json"] = model.description_json();
}

// Restores `manager`'s latest checkpoint, if any, after checking it fits this
// run's model and optimizer; the rest of the configuration may differ (TF restores
// a checkpoint under any strategy), and report_.resume says what changed.
Status RunCheckpoints::Restore(CheckpointManager& manager, const char* option, std::int64_t epoch_examples) {
  DTLAB_ASSIGN_OR_RETURN(auto latest, manager.LatestPath());
  if (!latest) return Status::Ok();
  DTLAB_ASSIGN_OR_RETURN(SafetensorsFile checkpoint, manager.RestoreLatest());
  const std::string where = std::string(option) + " " + manager.directory();
  DTLAB_RETURN_IF_ERROR(CheckCheckpointFits(checkpoint, model_, *state_.optimizer, config_, where, *latest));
  DTLAB_RETURN_IF_ERROR(RestoreCheckpoint(checkpoint, model_, state_).WithContext(*latest));
  DTLAB_ASSIGN_OR_RETURN(ResumeReport resume,
                         DescribeResume(checkpoint, *latest, recorded_, config_, model_, state_, epoch_examples));
  DTLAB_RETURN_IF_ERROR(CheckResumePosition(where, resume));
  state_.step_in_epoch = resume.position.step_in_epoch;
  report_.resumed_from_step = state_.step;
  report_.resume = std::move(resume);
  return Status::Ok();
}

// An asynchronous epoch leaves each worker at its own batch (worker_batches); a
// synchronous one leaves every replica at one step of the epoch's order. Neither
// position means anything to the other kind of engine, so a checkpoint taken in
// the middle of an epoch resumes on its own kind, and a parameter_server one with
// the same workers and batch.
Status RunCheckpoints::CheckResumePosition(const std::string& where, const ResumeReport& resume) const {
  if (state_.epoch >= config_.epochs) return Status::Ok();  // no epoch left to continue
  const std::string epoch = std::to_string(state_.epoch + 1);
  const bool async = config_.cluster.strategy == StrategyKind::kParameterServer;
  if (async && state_.worker_batches.empty() && state_.step_in_epoch > 0)
    return Status::InvalidArgument(where + " holds a checkpoint taken in the middle of epoch " + epoch + " (after " +
                                   std::to_string(state_.step_in_epoch) +
                                   " batches) by a synchronous strategy, and parameter_server resumes "
                                   "at the start of an epoch only, or in the middle of one of its own: finish epoch " +
                                   epoch + " first with a synchronous strategy (e.g. --strategy mirrored --epochs " +
                                   epoch + "), then resume with parameter_server");
  if (state_.worker_batches.empty()) return Status::Ok();
  std::string pushed;
  for (const std::int64_t b : state_.worker_batches) pushed += (pushed.empty() ? "" : ", ") + std::to_string(b);
  const std::string taken =
      " (its " + std::to_string(state_.worker_batches.size()) + " workers had pushed " + pushed + " batches)";
  if (!async)
    return Status::InvalidArgument(
        where + " holds a parameter_server checkpoint taken in the middle of epoch " + epoch + taken +
        ", and a synchronous strategy resumes at one position in the epoch's order, which asynchronous workers do "
        "not leave: finish epoch " +
        epoch + " first with parameter_server (--epochs " + epoch + "), then resume with " +
        std::string(StrategyName(config_.cluster.strategy)));
  if (static_cast<std::int64_t>(state_.worker_batches.size()) != config_.cluster.workers ||
      resume.checkpoint_global_batch != resume.global_batch)
    return Status::InvalidArgument(
        where + " holds a parameter_server checkpoint taken in the middle of epoch " + epoch + taken +
        " at global batch " + std::to_string(resume.checkpoint_global_batch) +
        ", and each worker's position counts "
        "its own batches: resume with --workers " +
        std::to_string(state_.worker_batches.size()) + " and global batch " +
        std::to_string(resume.checkpoint_global_batch) + ", or finish epoch " + epoch + " first with those");
  return Status::Ok();
}

Status RunCheckpoints::Open(std::int64_t epoch_examples) {
  for (const std::string& dir : {config_.checkpoint_dir, backup_chief_dir_}) {
    if (dir.empty()) continue;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status::IOError("cannot create " + dir + ": " + ec.message());
  }
  if (!config_.backup_dir.empty()) {
    backup_.emplace(backup_chief_dir_, 1);
    DTLAB_RETURN_IF_ERROR(Restore(*backup_, "--backup-dir", epoch_examples));
  }
  if (!config_.checkpoint_dir.empty()) {
    manager_.emplace(config_.checkpoint_dir, config_.max_to_keep);
    if (report_.resumed_from_step < 0) DTLAB_RETURN_IF_ERROR(Restore(*manager_, "--checkpoint-dir", epoch_examples));
  }
  last_saved_step_ = report_.resumed_from_step;
  // One writer per directory: a second training into it is refused here, before
  // it could sweep away the first one's temporary files (core/checkpoint_manager.h).
  // Taken after the restore (which only reads), so a refused resume or a bad
  // metrics.csv leaves nothing behind, not even a lock file.
  if (chief_) {
    if (!config_.checkpoint_dir.empty())
      DTLAB_RETURN_IF_ERROR(CheckAppendPath(MetricsCsvPath(config_.checkpoint_dir), "metrics file"));
    for (const std::string& dir : {config_.checkpoint_dir, backup_chief_dir_}) {
      if (dir.empty()) continue;
      DTLAB_ASSIGN_OR_RETURN(ExclusiveFileLock lock, CheckpointManager(dir, 0).LockForWriting());
      writer_locks_.push_back(std::move(lock));
    }
  }
  if (group_ == nullptr) return Status::Ok();
  // Every worker must resume from the same step (or none).
  DTLAB_ASSIGN_OR_RETURN(const std::vector<std::int64_t> resumed,
                         group_->AllGatherOne(report_.resumed_from_step, "agreeing on where to resume", 0));
  for (std::size_t w = 0; w < resumed.size(); ++w)
    if (resumed[w] != resumed[0])
      return Status::InvalidArgument(
          "rank " + std::to_string(w) + " " +
          (resumed[w] < 0 ? std::string("found no checkpoint")
                          : "would resume from step " + std::to_string(resumed[w])) +
          " but rank 0 " +
          (resumed[0] < 0 ? std::string("found none") : "resumes from step " + std::to_string(resumed[0])) +
          ": every worker reads the chief's checkpoint directory, so it must be on a file system all machines share "
          "(docs/mpi.md)");
  return Status::Ok();
}

// Saves the state into `manager` (the chief) or into this worker's temporary
// directory, which it then deletes; every worker takes part, and none goes on
// before all have saved.
Status RunCheckpoints::SaveInto(CheckpointManager& manager, const std::string& worker_temp, std::int64_t number,
                                TrainingEngine& engine, std::string* path) {
  engine.ExportState(state_);
  if (chief_) {
    DTLAB_RETURN_IF_ERROR(manager.Save(MakeCheckpoint(model_, state_, recorded_), number, path));
  } else {
    std::error_code ec;
    std::filesystem::create_directories(worker_temp, ec);
    if (ec) return Status::IOError("cannot create " + worker_temp + ": " + ec.message());
    CheckpointManager temp(worker_temp, 1);
    DTLAB_RETURN_IF_ERROR(temp.Save(MakeCheckpoint(model_, state_, recorded_), number, path));
    std::filesystem::remove_all(worker_temp, ec);
    std::filesystem::remove(std::filesystem::path(worker_temp).parent_path(), ec);  // workertemp_RANK, if empty
  }
  if (group_ != nullptr)
    DTLAB_RETURN_IF_ERROR(group_->Barrier("saving checkpoint " + std::to_string(number), state_.step));
  return Status::Ok();
}

Status RunCheckpoints::Save(TrainingEngine& engine, TrainObserver& observer) {
  if (!manager_) return Status::Ok();
  std::string path;
  DTLAB_RETURN_IF_ERROR(SaveInto(*manager_, group_ ? WorkerTempDir(config_.checkpoint_dir, group_->rank()) : "",
                                 state_.step, engine, &path));
  report_.last_checkpoint = path;
  last_saved_step_ = state_.step;
  observer.OnCheckpoint(path);
  return Status::Ok();
}

Status RunCheckpoints::SaveBackup(TrainingEngine& engine) {
  if (!backup_) return Status::Ok();
  std::string path;
  const std::string temp =
      group_ ? (std::filesystem::path(config_.backup_dir) / ("workertemp_" + std::to_string(group_->rank()))).string()
             : "";
  return SaveInto(*backup_, temp, state_.step, engine, &path);
}

Status RunCheckpoints::AfterStep(TrainingEngine& engine, TrainObserver& observer) {
  const bool checkpoint = config_.checkpoint_every > 0 && state_.step % config_.checkpoint_every == 0;
  const bool backup_now = backup_ && config_.backup_every > 0 && state_.step % config_.backup_every == 0;
  // A parameter_server epoch finds a non-finite loss at its end; a checkpoint
  // must not hold one before (RestoreCheckpoint would refuse it).
  if ((checkpoint || backup_now) && !std::isfinite(state_.train_loss_total))
    return Status::Runtime("the loss became non-finite in epoch " + std::to_string(state_.epoch + 1) +
                           "; try a smaller --lr");
  if (checkpoint) DTLAB_RETURN_IF_ERROR(Save(engine, observer));
  if (backup_now) DTLAB_RETURN_IF_ERROR(SaveBackup(engine));
  return Status::Ok();
}

Status RunCheckpoints::AfterEpoch(TrainingEngine& engine, TrainObserver& observer) {
  // The tutorial checkpoints after every 2nd epoch; the checkpoint resumes at the
  // start of the next one.
  const bool epoch_checkpoint = config_.checkpoint_every == 0 && state_.epoch % 2 == 0;
  if (!epoch_checkpoint && !(backup_ && config_.backup_every == 0)) return Status::Ok();
  ++state_.epoch;
  Status saved = epoch_checkpoint ? Save(engine, observer) : Status::Ok();
  if (saved.ok() && config_.backup_every == 0) saved = SaveBackup(engine);
  --state_.epoch;
  return saved;
}

Status RunCheckpoints::AppendMetrics(const EpochReport& epoch) const {
  if (!manager_ || !chief_) return Status::Ok();
  return AppendMetricsCsv(config_.checkpoint_dir, epoch);
}

Status RunCheckpoints::Finish(TrainingEngine& engine, TrainObserver& observer) {
  if (manager_ && state_.step != last_saved_step_) DTLAB_RETURN_IF_ERROR(Save(engine, observer));
  // BackupAndRestore deletes its backup once training has ended normally.
  if (backup_ && chief_) {
    std::error_code ec;
    std::filesystem::remove_all(backup_chief_dir_, ec);
    if (ec) return Status::IOError("cannot delete the backup " + backup_chief_dir_ + ": " + ec.message());
  }
  return Status::Ok();
}

Status RunCheckpoints::Stopped(TrainingEngine& engine, TrainObserver& observer) {
  if (manager_ && state_.step != last_saved_step_) DTLAB_RETURN_IF_ERROR(Save(engine, observer));
  return SaveBackup(engine);  // kept: the run did not end normally
}

}  // namespace dtlab
