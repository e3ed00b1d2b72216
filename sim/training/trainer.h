// Train and EvaluateCheckpoint: the tf.distribute custom training loop, over any
// strategy's TrainingEngine (sim/engines/training_engine.h): one device, synchronous
// replicas (sim/engines/cluster.h) or asynchronous parameter-server workers
// (sim/engines/parameter_server.h). Train is the loop; its checkpoints and backup live in
// sim/training/checkpointing.h, --dump-step in sim/training/step_dump.h, the simulated time and
// trace in sim/training/run_timing.h, and the test-set evaluation in sim/training/evaluation.h.
//
// Per step, as the tutorial's train_step:
//   loss = compute_average_loss(per_example_loss, global_batch_size)
//        + scale_regularization_loss(model.losses)
//   gradients = d loss / d params; optimizer.apply_gradients(...)
//   train_accuracy.update_state(labels, predictions); total_loss += loss
// and per epoch: Loss = total_loss / num_batches, the test set's Mean loss and
// accuracy, and checkpoints in the CheckpointManager directory.
//
// Everything is deterministic: the same config gives bit-identical weights,
// metrics and checkpoints for any thread count.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/mnist.h"
#include "core/status.h"
#include "sim/engines/cluster.h"
#include "sim/timing/cost_model.h"
#include "sim/compute/device_backend.h"
#include "sim/input/distributed_input.h"
#include "sim/timing/topology.h"
#include "sim/comm/worker_group.h"
#include "sim/training/memory_estimate.h"

namespace dtlab {

/// A piecewise-constant learning rate by epoch: each entry is (first 1-based epoch, rate).
using LearningRateSchedule = std::vector<std::pair<std::int64_t, float>>;

/// Parses "1:1e-3,4:1e-4,8:1e-5" or "tutorial" (the tutorial's decay(): 1e-3 for
/// epochs 1-3, 1e-4 for 4-7, 1e-5 after). The first entry must start at epoch 1.
StatusOr<LearningRateSchedule> ParseLearningRateSchedule(const std::string& text);

/// The largest global batch (and batch per replica) a run takes: bounded before
/// anything multiplies it (docs/reliability.md, "Integers and floats").
inline constexpr std::int64_t kMaxGlobalBatch = std::int64_t{1} << 24;

struct TrainConfig {
  std::string model = "seed-cnn";
  std::string dataset = "fashion-mnist";  // a name or a directory (see mnist.h)
  std::int64_t epochs = 10;
  std::int64_t batch_per_replica = 64;  // global batch = batch_per_replica x replicas
  std::string optimizer = "adam";
  std::optional<float> learning_rate;  // unset: the optimizer's Keras default
  float momentum = 0.0f;               // SGD only
  LearningRateSchedule schedule;       // empty: constant learning_rate
  std::uint64_t seed = 1;
  std::int64_t max_steps = -1;        // stop after this many optimizer steps (< 0: no limit; K micro-batches each)
  std::string checkpoint_dir;         // empty: no checkpoints
  std::int64_t checkpoint_every = 0;  // steps; 0: after every 2nd epoch (the tutorial's rule)
  int max_to_keep = 5;
  std::int64_t dump_step = -1;  // 1-based step to dump (< 1: none)
  std::string dump_dir;
  std::int64_t shuffle_buffer = 0;  // 0: the whole training set (the tutorial's BUFFER_SIZE)
  std::int64_t chunk_size = 16;     // examples per task; fixed, so results never depend on threads

  // The virtual cluster (sim/engines/cluster.h) and its input (sim/input/distributed_input.h).
  ClusterConfig cluster;  // strategy, replicas, workers, all-reduce, convention, denominator
  InputApi input = InputApi::kDistributeDataset;
  RebatchRule rebatch = RebatchRule::kV2;
  AutoShardPolicy shard_policy = AutoShardPolicy::kAuto;
  bool drop_remainder = false;
  // The cost model (sim/timing/cost_model.h): simulated time of compute and collectives.
  TopologyKind topology = TopologyKind::kFullyConnected;
  LinkParameters link;
  double device_flops_per_second = 100e9;  // simulated compute speed of one replica
  std::string trace_path;                  // --trace: Chrome trace-event JSON of the first trace_steps steps
  std::int64_t trace_steps = 3;
  // parameter_server only.
  std::int32_t parameter_servers = 1;
  double straggler_spread = 0.5;  // a worker's step takes (1 + spread * u) x its compute time

  std::optional<std::int64_t> global_batch;  // overrides batch_per_replica x replicas

  // tf.keras.callbacks.BackupAndRestore: a backup of the whole training state in
  // backup_dir/chief, saved every backup_every steps (0: at the end of every epoch),
  // restored first when the run starts, and deleted when training ends normally.
  std::string backup_dir;
  std::int64_t backup_every = 0;

  /// A multi-worker run on MPI (sim/comm/mpi_group.h): this process is worker
  /// worker_group->rank() and trains its replicas; rank 0 is the chief, which
  /// writes the checkpoints (the others write workertemp_RANK and delete it).
  /// Not owned; null in a single-process run.
  WorkerGroup* worker_group = nullptr;
  /// Where the replicas' forward and backward passes run (sim/compute/device_backend.h):
  /// made for the run's model when set; unset, the CPU. Synchronous strategies only.
  std::function<StatusOr<std::unique_ptr<ComputeBackend>>(const Sequential<float>&)> make_compute_backend;
  /// A graceful stop (docs/training.md, "Stopping a run"): set asynchronously, by a
  /// signal handler (cli/graceful_stop.h), to the signal's number. Nonzero: the
  /// run finishes its step, saves a checkpoint in checkpoint_dir and the backup
  /// (which it keeps), and returns with TrainReport::stopped_by set. The ranks of
  /// an MPI run agree after every step, so all stop after the same one.
  /// Synchronous strategies stop after any step; parameter_server at the end of
  /// its epoch. Not owned; null: never.
  const std::atomic<int>* stop_request = nullptr;
  /// --dry-run: estimate the run's memory and simulated time, train nothing
  /// (TrainReport::dry_run).
  bool dry_run = false;
  /// --max-memory: refuse a run whose estimated peak exceeds this many bytes (0: no
  /// limit but the machine's; sim/training/memory_estimate.h).
  double max_memory_bytes = 0;

  std::int64_t global_batch_size() const { return global_batch.value_or(batch_per_replica * cluster.replicas); }
  /// The examples of one optimizer step: the global batch x --accumulation-steps
  /// (sim/engines/accumulation.h). Checkpoints record it as their global batch and
  /// count their position in it. REQUIRES: Validate() passed.
  std::int64_t step_batch_size() const { return cluster.accumulation.steps * global_batch_size(); }

  /// InvalidArgument naming the option if a value is out of range.
  Status Validate() const;
};

struct EpochReport {
  std::int64_t epoch = 0;  // 1-based
  float learning_rate = 0;
  float train_loss = 0, train_accuracy = 0, test_loss = 0, test_accuracy = 0;
  double seconds = 0;
  std::int64_t steps = 0;  // optimizer steps taken in this epoch (this run)
  // --loss-scale dynamic: the scale of the epoch's last step and the steps whose
  // update was skipped (a gradient overflowed); loss_scale 0 without one.
  float loss_scale = 0;
  std::int64_t skipped_steps = 0;
};

/// The reference check over a whole run (--check-reference).
struct ReferenceCheckSummary {
  std::int64_t steps_checked = 0, steps_failed = 0;
  double max_abs_diff = 0, max_bound_fraction = 0;
  std::int64_t max_ulp = 0;
  bool within_bound = true;
  bool per_example_values_identical = true;
  std::int64_t first_failed_step = -1;
  std::string first_failure;  // the explanation of the first failed step, in words
  bool exact = false;         // exact mode: passing means bitwise equal
  struct StepVerdict {
    std::int64_t step = 0;
    bool passed = true;  // within the bound (fast) or bitwise equal (exact)
    std::int64_t max_ulp = 0;
  };
  std::vector<StepVerdict> per_step;
  void Add(const StepCheck& check);
};

/// Where a resumed run continues in its epoch (MapEpochPosition).
struct EpochPosition {
  std::int64_t step_in_epoch = 0;      // batches of this run's global batch already taken in the epoch
  std::int64_t examples_consumed = 0;  // examples of the epoch the checkpoint's run had taken
  std::int64_t examples_skipped = 0;   // examples after those that this run leaves out of the epoch
};

/// The position in an epoch of `epoch_examples` examples after `step_in_epoch`
/// batches of `checkpoint_global_batch`, in batches of `global_batch`. The
/// examples taken are step_in_epoch x checkpoint_global_batch (at most the
/// epoch's size; the epoch's shuffled order does not depend on the batch), and the
/// new position rounds up: ceil(taken / global_batch), so that no example is seen
/// twice in one epoch; the price is examples_skipped (< global_batch) examples
/// left out of this epoch. With an unchanged global batch the position is
/// step_in_epoch as it is. Never overflows: any int64 input gives a result.
/// REQUIRES: step_in_epoch >= 0, checkpoint_global_batch >= 1, global_batch >= 1,
/// epoch_examples >= 0.
EpochPosition MapEpochPosition(std::int64_t step_in_epoch, std::int64_t checkpoint_global_batch,
                               std::int64_t global_batch, std::int64_t epoch_examples);

/// What a resumed run took from its checkpoint, and how its configuration differs
/// from the run that wrote it (docs/training.md, "Resuming on another configuration").
struct ResumeReport {
  std::string checkpoint;                     // the path restored
  std::int64_t step = 0;                      // optimizer steps already taken
  std::int64_t epoch = 0;                     // the 1-based epoch the run continues in
  std::int64_t model_variables = 0;           // model/... tensors restored
  std::vector<std::string> optimizer_slots;   // e.g. {"m", "v"} for Adam
  std::int64_t optimizer_slot_variables = 0;  // optimizer/<slot>/... tensors restored
  std::int64_t optimizer_iterations = 0;      // optimizer/iterations
  /// A setting the checkpoint records (its dtlab.* metadata) with another value in
  /// this run, e.g. {"replicas", "4", "3"}; in a fixed order.
  struct Change {
    std::string setting, checkpoint, run;
  };
  std::vector<Change> changes;
  /// An exact-mode checkpoint does not record the strategy, replicas, workers,
  /// batch per replica or chunk size (they do not change its numbers), so a change
  /// of those is not listed.
  bool layout_recorded = true;
  bool data_order_changed = false;  // the seed, shuffle buffer or data set changed
  // The position in the epoch: the checkpoint's batches of its global batch, then
  // this run's (docs/training.md).
  std::int64_t checkpoint_global_batch = 0, global_batch = 0;
  std::int64_t checkpoint_step_in_epoch = 0;
  EpochPosition position;
  std::int64_t epoch_examples = 0;  // examples in one epoch of the training set
};

/// One full synchronous step by the cost model (EstimateFullStep, sim/training/run_timing.h).
struct StepTimeEstimate {
  double compute_seconds = 0, collective_seconds = 0;
  std::int64_t collective_bytes = 0;  // bytes the step's collectives move
};

/// --dry-run: what the run would cost, from the memory estimate and the cost model.
struct DryRunReport {
  MemoryEstimate memory;      // what the run would still allocate
  double resident_bytes = 0;  // what the process holds already (the data set, the code)
  double peak_bytes = 0;      // resident_bytes + memory.total_bytes: the estimated peak
  std::optional<AvailableMemory> available;
  Status fits;                        // Ok, or the refusal a real run would get (exit 2)
  std::int32_t largest_replicas = 0;  // the most replicas that fit (0: nothing known available)
  std::int64_t steps = 0;             // optimizer steps the run would take
  StepTimeEstimate step;              // one full step, by the cost model
  std::string time_not_estimated;     // why `step` is zero, if it is
  double simulated_seconds = 0;       // steps x one full step
};

struct TrainReport {
  std::vector<EpochReport> epochs;
  std::int64_t steps = 0;               // total optimizer steps at the end
  std::int64_t resumed_from_step = -1;  // >= 0 if the run resumed from a checkpoint
  std::optional<ResumeReport> resume;   // set if the run resumed from a checkpoint
  double seconds = 0;                   // wall time of training (without test evaluation)
  double images_per_second = 0;         // training examples per second of training time
  float final_test_accuracy = 0, final_test_loss = 0;
  std::string last_checkpoint;  // path of the last checkpoint written, if any
  std::string model_summary;
  std::string input_description;  // how the data set is distributed
  std::optional<ReferenceCheckSummary> reference_check;
  double simulated_seconds = 0;  // the cost model's time of the whole run
  double simulated_collective_seconds = 0;
  /// The gradients were summed by the folded reduction (docs/cluster.md): its steps'
  /// collectives are priced from the schedule the run names, or, when that is too
  /// large to price, not at all, and this says why.
  bool folded_reduction = false;
  std::string collectives_not_simulated;
  std::int64_t collective_bytes = 0;  // bytes all collectives moved between replicas
  /// Memory: the estimate the run was admitted with (what the process held at the
  /// start plus what the run allocates, memory_estimate.h) and the peak resident set
  /// measured over the run (0 if unknown).
  double estimated_peak_bytes = 0;
  double peak_resident_bytes = 0;
  std::vector<std::int64_t> staleness;  // parameter_server: per update, in update order
  std::uint64_t weights_digest = 0;     // FNV-1a of the final variables' bytes: equal digests, equal bits
  std::int64_t skipped_steps = 0;       // --loss-scale dynamic: updates skipped in this run (overflows)
  int stopped_by = 0;                   // TrainConfig::stop_request's value (a signal) when the run stopped early on it
  std::optional<DryRunReport> dry_run;  // --dry-run: set, and nothing was trained
};

/// What one synchronous step did, for observers that record per-step metrics
/// (scenario reports). Pointers are valid during the OnTrainStep call only.
struct StepRecord {
  std::int64_t step = 0;               // 1-based optimizer step
  std::int64_t epoch = 0;              // 1-based
  float mean_loss = 0, accuracy = 0;   // the running epoch metrics after this step
  const StepResult* result = nullptr;  // loss, replica losses and batch sizes, reference check
  const std::vector<std::vector<std::int64_t>>* examples = nullptr;  // per replica, indices into the training set
  std::vector<double> compute_seconds;                               // per replica, simulated (cost model)
  std::vector<CollectiveCost> collectives;                           // the step's collectives, simulated
  const ParameterList<float>* variables = nullptr;                   // after the update
  const ParameterList<float>* reduced_gradient = nullptr;            // the update's gradient, if the observer wants it
};

/// Receives progress while training runs (the CLI draws a progress bar with it).
class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void OnStart(const std::string& /*model_summary*/, std::int64_t /*resumed_from_step*/) {}
  /// Right after OnStart, if the run resumed from a checkpoint.
  virtual void OnResume(const ResumeReport& /*resume*/) {}
  /// How the data reaches the replicas (DistributedDataset::Describe), after
  /// OnStart and OnResume.
  virtual void OnInput(const std::string& /*input_description*/) {}
  virtual void OnEpochBegin(std::int64_t /*epoch*/, float /*learning_rate*/, std::int64_t /*steps_in_epoch*/) {}
  virtual void OnStep(std::int64_t /*step_in_epoch*/, std::int64_t /*steps_in_epoch*/, float /*mean_loss*/,
                      float /*accuracy*/) {}
  virtual void OnEvaluating() {}
  virtual void OnEpochEnd(const EpochReport& /*report*/) {}
  virtual void OnCheckpoint(const std::string& /*path*/) {}
  virtual void OnReferenceFailure(const StepCheck& /*check*/) {}
  virtual void OnTrainStep(const StepRecord& /*record*/) {}
  /// True if OnTrainStep should get StepRecord::reduced_gradient (a copy per step).
  virtual bool WantsReducedGradient() const { return false; }
};

/// FNV-1a of the variables' bytes in order: equal digests, equal bits (in practice).
std::uint64_t WeightsDigest(const ParameterList<float>& variables);

/// The last optimizer step a run from step 0 reaches on `train_examples` examples:
/// epochs x batches per epoch, capped by max_steps (saturates instead of overflowing).
std::int64_t LastStep(const TrainConfig& config, std::int64_t train_examples);

/// Trains `config.model` on `data`. If config.backup_dir or config.checkpoint_dir
/// holds a checkpoint of the same model and optimizer, training resumes from it
/// where it stopped, on any strategy, replica or worker count, batch, chunk size,
/// math mode, seed or shuffle buffer (TrainReport::resume says what carried over
/// and what changed; a changed global batch moves the position in the epoch by
/// MapEpochPosition). Errors: InvalidArgument for bad options, a checkpoint of
/// another model or optimizer, or a checkpoint taken in the middle of an epoch
/// that this run cannot continue (a synchronous one for parameter_server; a
/// parameter_server one for another strategy, worker count or global batch;
/// sim/training/checkpointing.h); Corruption for a damaged checkpoint; IOError when writing
/// fails; Runtime when the loss becomes NaN or infinite.
StatusOr<TrainReport> Train(const TrainConfig& config, const TrainTestData& data, TrainObserver* observer = nullptr);

struct EvalReport {
  std::string checkpoint;
  std::string model;
  std::int64_t step = 0;
  float test_loss = 0, test_accuracy = 0;
  std::int64_t examples = 0;
};

/// Restores the latest checkpoint in `checkpoint_dir` and evaluates the model on
/// `data.test` in batches of `batch_size` (<= 0: the batch size the run trained with).
/// Defined in sim/training/evaluation.cc.
StatusOr<EvalReport> EvaluateCheckpoint(const std::string& checkpoint_dir, const TrainTestData& data,
                                        std::int64_t batch_size = 0);

}  // namespace dtlab
