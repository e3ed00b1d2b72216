// Cluster: N virtual replicas in one process, each with its own copy of the
// variables, its optimizer and its metrics, stepping together as a tf.distribute
// strategy does (strategy.run of the tutorial's train_step, then the cross-replica
// reduction of gradients and losses).
//
// A step: every replica computes its per-example losses and gradients on its share
// of the global batch (BatchRunner segments, run as oneTBB tasks), scales them as
// the convention and denominator say, adds its scaled regularization gradient, and
// then the replicas' gradient buffers go through a real collective (sim/comm/collectives.h):
// an all-reduce for the mirrored strategies, or a reduce to the host copy followed by
// a broadcast of the updated variables for CentralStorage. Above config.fold_above
// replicas the mirrored strategies fold instead (FoldsReduction): the replicas
// compute in waves into shared slots, and each wave is added to one sum in replica
// order, the collective's words in exact mode and the naive all-reduce's float sum
// in fast mode (docs/cluster.md, "Folded reduction"). With check_reference, the
// same step is also computed on one device over the whole global batch with the same
// weights and compared variable by variable (sim/engines/reference_step.h). Injected faults
// (sim/engines/fault_injector.h) wrap the compute and the transport.
//
// Thread safety: not thread-safe; one caller drives the cluster.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/dropout.h"
#include "core/huge_pages.h"
#include "core/loss.h"
#include "core/metrics.h"
#include "core/mnist.h"
#include "core/model.h"
#include "core/optimizer.h"
#include "core/training_state.h"
#include "sim/compute/batch_runner.h"
#include "sim/comm/collectives.h"
#include "sim/comm/compact_exact.h"
#include "sim/engines/accumulation.h"
#include "sim/engines/mixed_precision.h"
#include "sim/engines/fault_injector.h"
#include "sim/comm/faults.h"
#include "sim/engines/loss_code.h"
#include "sim/comm/message_log.h"
#include "sim/engines/reference_check.h"
#include "sim/engines/reference_step.h"
#include "sim/engines/strategy.h"
#include "sim/engines/training_engine.h"
#include "sim/comm/worker_group.h"

namespace dtlab {

class ComputeBackend;

/// The cluster's shape and checks, and the loss code its replicas run (the LossCode
/// base: convention, denominator, regularization, reduction, ...).
struct ClusterConfig : LossCode {
  StrategyKind strategy = StrategyKind::kOneDevice;
  std::int32_t replicas = 1;  // num_replicas_in_sync (workers x replicas per worker)
  std::int32_t workers = 1;
  AllReduceAlgorithm all_reduce = AllReduceAlgorithm::kRing;
  bool check_reference = false;
  MathMode math = MathMode::kFast;
  /// --accumulation-steps and --accumulation (sim/engines/accumulation.h).
  GradientAccumulation accumulation;
  /// --precision and the loss scale (sim/engines/mixed_precision.h).
  MixedPrecision precision;
  // Dropout's masks (core/dropout.h): keyed by example (the default) or per replica,
  // under the run's seed (Train sets it from TrainConfig::seed).
  DropoutRng dropout_rng = DropoutRng::kKeyed;
  std::uint64_t dropout_seed = 0;
  // Fault injection (sim/comm/faults.h) and detection.
  std::vector<FaultSpec> faults;
  double collective_timeout_seconds = 60;  // how long a collective waits for a replica (simulated)
  /// Above this many replicas the gradients are summed by a folded reduction instead
  /// of the all-reduce's buffers (docs/cluster.md, "Folded reduction"), where
  /// Cluster::FoldsReduction allows it.
  std::int32_t fold_above = 256;
  /// Exact mode's all-reduce of the gradients (sim/comm/compact_exact.h): the compact
  /// rounds (about 8 bytes per value on the wire), or the words (same bits). Central
  /// storage's reduce to the host and the folded reduction always use the words.
  ExactAllReduce exact_all_reduce = ExactAllReduce::kCompact;

  const LossCode& loss() const { return *this; }
  using LossCode::split;
  /// The regularization split in force: the one asked for, else exact mode's or fast mode's default.
  RegularizationSplit split() const { return LossCode::split(math); }

  std::int32_t replicas_per_worker() const { return workers > 0 ? replicas / workers : 0; }
  /// InvalidArgument naming the option for N < 1, workers that do not divide N, a
  /// strategy that does not take that many replicas or workers, and for a loss
  /// reduction the chosen Keras refuses in custom loops (LossCode::Validate), and
  /// for gradient accumulation where a strategy or option cannot take it.
  Status Validate() const;
};

/// What one synchronous step produced. With gradient accumulation, one optimizer
/// step: the losses and batch sizes summed over its micro-batches.
struct StepResult {
  float loss = 0;                     // strategy.reduce(SUM, per-replica losses) (MEAN for DDP)
  std::vector<float> replica_losses;  // experimental_local_results of the per-replica losses
  std::vector<std::int64_t> replica_batch_sizes;
  std::int64_t examples = 0;
  std::optional<StepCheck> check;         // with check_reference
  std::vector<double> straggler_seconds;  // per replica: injected extra compute (simulated), if any
  /// Gradient accumulation: the most any example of the step weighed in the
  /// update against its weight in one device's step on the whole group (1: as
  /// much; Keras's mean of means gives a short micro-batch's examples more); 0 when
  /// not accumulating.
  double max_example_weight = 0;
  /// --loss-scale dynamic: the scale this step's loss was multiplied by (0: none),
  /// and whether the update was skipped (a gradient overflowed; every replica
  /// skipped it unless --loss-scale-check let them disagree).
  float loss_scale = 0;
  bool skipped = false;
  /// The gradients were summed by the folded reduction (no message was sent; the
  /// cost model prices the all-reduce the run names, sim/training/run_timing.h).
  bool folded = false;
};

/// The examples of one step (or one micro-batch): per replica, indices into the training set.
using ReplicaBatches = std::vector<std::vector<std::int64_t>>;

/// A replica's loss as a step sums it: a float, or exact mode's accumulator.
template <typename Word>
using ReplicaLossSum = std::conditional_t<std::is_same_v<Word, std::int64_t>, ExactSum, float>;

class Cluster final : public TrainingEngine {
 public:
  /// Builds N replicas holding copies of `initial` and each its own optimizer.
  /// With a worker group (a multi-worker run on MPI, sim/comm/worker_group.h), this
  /// process builds only its worker's N / W replicas and the group carries what
  /// crosses workers; config.workers must then equal the group's size.
  static StatusOr<std::unique_ptr<Cluster>> Create(const Sequential<float>& model, const ClusterConfig& config,
                                                   std::string_view optimizer, const OptimizerOptions& options,
                                                   const ParameterList<float>& initial, std::int64_t chunk_size,
                                                   WorkerGroup* group = nullptr);

  std::int32_t num_replicas_in_sync() const { return config_.replicas; }
  const ClusterConfig& config() const { return config_; }

  /// One training step. `per_replica[r]` lists replica r's examples of `data`
  /// (possibly none); `global_batch_size` is the configured global batch. If
  /// `reduced_gradient` is not null it receives the reduced gradient the update used.
  StatusOr<StepResult> TrainStep(const ImageDataset& data, const std::vector<std::vector<std::int64_t>>& per_replica,
                                 std::int64_t global_batch_size, float learning_rate, std::int64_t step,
                                 ParameterList<float>* reduced_gradient = nullptr);

  /// One optimizer step of gradient accumulation (config.accumulation, defined in
  /// cluster_accumulation.cc): the micro-batches `group` (1 to K of them, each
  /// `per_replica` as TrainStep takes it; fewer than K only for the global rule's
  /// partial group at an epoch's end), `global_batch_size` the configured global
  /// batch of one micro-batch. The result's losses and batch sizes are the step's,
  /// over all its micro-batches; its check compares with one device on all of them.
  StatusOr<StepResult> TrainAccumulatedStep(const ImageDataset& data, std::span<const ReplicaBatches* const> group,
                                            std::int64_t global_batch_size, float learning_rate, std::int64_t step,
                                            ParameterList<float>* reduced_gradient = nullptr);

  /// One epoch of TrainStep calls (sim/engines/training_engine.h; defined in cluster_epoch.cc).
  StatusOr<EpochOutcome> TrainEpoch(const EpochRequest& request,
                                    const std::function<Status(const EngineStep&)>& on_step) override;

  /// The training accuracy read across replicas: the replicas' metric states summed.
  SparseCategoricalAccuracy MergedAccuracy() const override;
  void ResetMetrics() override;

  /// The variables every replica computes with (replica 0's copy; the host copy for
  /// CentralStorage).
  const ParameterList<float>& variables() const override;
  /// This process's k-th replica's own copy of the variables (its moving statistics
  /// included; empty with central_storage, whose replicas read the host's copy).
  /// REQUIRES: k < the replicas this process holds.
  const ParameterList<float>& replica_variables(std::size_t k) const { return replicas_[k].params; }
  /// True when every replica's copy of the trainable variables is bitwise equal.
  /// Non-trainable ones (BatchNormalization's moving statistics) are each replica's
  /// own, as in TensorFlow, and differ under an unsynchronized layer.
  bool ReplicasInSync() const;

  /// Copies replica 0's (or the host's) variables, optimizer and the merged metric
  /// state into `state`; ImportState loads them into every replica.
  void ExportState(TrainingState& state) const override;
  void ImportState(const TrainingState& state) override;

  MessageLog& message_log() override { return log_; }

  /// Computes the replicas' forward and backward passes with `backend` (not owned;
  /// null: the CPU's BatchRunner). The one-device reference of --check-reference
  /// stays on the CPU; in fast mode it is then the exact gradient (the backends'
  /// per-example values are exact mode's), held against the float bound.
  void set_compute_backend(ComputeBackend* backend) { compute_ = backend; }

  /// True when a cluster of `config` for `model` sums its replicas' gradients with the
  /// folded reduction: more than config.fold_above replicas in one process (no worker
  /// group), mirrored variables (mirrored, multi_worker_mirrored, tpu) or the host's
  /// (central_storage: the one sum is what the reduce gives the host), no injected
  /// faults (they hit the collective's messages), and none of what needs every
  /// replica's own gradient buffer at once: gradient accumulation in fast mode, a
  /// synchronized BatchNormalization layer (it sums every replica's statistics
  /// mid-pass). (A dynamic loss scale folds: each
  /// replica keeps its own verdict on overflow, --loss-scale-check.)
  static bool FoldsReduction(const ClusterConfig& config, const Sequential<float>& model, bool worker_group) {
    return config.replicas > config.fold_above && CanFold(config, model, worker_group);
  }
  /// FoldsReduction's conditions but the replica count: the replicas compute in waves
  /// (ComputesInWaves), in one process, and gradient accumulation only in exact mode
  /// (the fold then sums every micro-batch's words too, in any order the same words;
  /// fast mode's replicas each sum their micro-batches first, in float).
  /// No injected faults either: the fold sends no message for them to hit.
  static bool CanFold(const ClusterConfig& config, const Sequential<float>& model, bool worker_group) {
    return !worker_group && (!config.accumulation.on() || config.math == MathMode::kExact) && config.faults.empty() &&
           ComputesInWaves(config, model);
  }
  /// Whether the replicas may compute in waves of slots, none holding a gradient
  /// buffer of its own: mirrored variables or the host's, and no synchronized
  /// BatchNormalization layer. (An unsynchronized one normalizes each replica by its
  /// own batch: a wave's staged passes need no other. Injected faults hit a wave's
  /// replicas as they compute, and the collectives after the waves.)
  static bool ComputesInWaves(const ClusterConfig& config, const Sequential<float>& model);
  bool folded() const { return folded_; }
  /// Whether exact mode's compact all-reduce of a cluster of `config` for `model`
  /// reads encodings the replicas keep: wherever the replicas can compute in waves and
  /// the fold does not run (FoldsReduction), replica count aside; not central_storage,
  /// whose reduce to the host moves the words.
  static bool MayCompactGradients(const ClusterConfig& config, const Sequential<float>& model) {
    return config.math == MathMode::kExact && config.exact_all_reduce == ExactAllReduce::kCompact &&
           config.strategy != StrategyKind::kCentralStorage && ComputesInWaves(config, model);
  }
  /// True when exact mode's compact all-reduce reads the replicas' gradients encoded
  /// (CompactGradient, about 16 bytes per value) instead of their accumulator words:
  /// MayCompactGradients, several replicas, and no fold (in one process up to
  /// config.fold_above replicas; on MPI ranks, which never fold, any count). The
  /// replicas then compute in waves, as
  /// folded ones do, and each keeps only its encoding (with accumulation, of its
  /// micro-batches' sum so far).
  static bool CompactsGradients(const ClusterConfig& config, const Sequential<float>& model, bool worker_group) {
    return config.replicas > 1 && MayCompactGradients(config, model) && !FoldsReduction(config, model, worker_group);
  }
  bool compacted() const { return compacted_; }
  /// Replicas whose gradients the folded reduction computes at once (its wave).
  static std::int32_t FoldWave();

 private:
  // Where a replica's gradient is computed: its own (the collective's buffers), or
  // a wave slot of the folded reduction.
  struct GradientSlot {
    ParameterList<float> grads;
    // The gradient (or variables) packed for the collective; across MPI ranks another
    // process reads it by single copy, which pins it a page at a time (a large
    // model's: 2 MiB pages).
    HugePageVector<float> flat;
    std::vector<std::int64_t> words;  // exact mode: the gradient as accumulator words
  };
  struct Replica : GradientSlot {
    ParameterList<float> params;           // its copy of the variables (none with central_storage)
    std::unique_ptr<Optimizer> optimizer;  // its slots (none with central_storage)
    // Gradient accumulation: the sum of the group's micro-batch gradients so far.
    HugePageVector<float> accumulated;  // swapped with `flat`
    std::vector<std::int64_t> accumulated_words;
    // --loss-scale dynamic: this replica's copy of the LossScaleOptimizer's state (the
    // copies move together unless --loss-scale-check each-replica lets one skip
    // alone), and whether its own gradient was finite before the all-reduce.
    DynamicLossScale loss_scale;
    bool local_finite = true;
    // Exact mode's compact all-reduce, where the cluster compacts (CompactsGradients):
    // the replica's gradient, encoded after its wave.
    CompactGradient compact;
    // BatchNormalization: the statistics of the replica's own batch this step, per
    // layer, kept from its wave's passes for the update of its moving statistics.
    std::vector<BatchNormStatistics> batch_norm;
  };
  // One step's (or micro-batch's) examples, gathered into images_ and labels_.
  struct StepLayout {
    std::vector<std::int64_t> indices;      // in replica order
    std::vector<std::int64_t> offsets;      // replica r owns [offsets[r], offsets[r+1])
    std::vector<std::int64_t> batch_sizes;  // per replica
  };
  Cluster(const Sequential<float>& model, const ClusterConfig& config, std::int64_t chunk_size);
  bool central() const { return config_.strategy == StrategyKind::kCentralStorage; }
  // This process's replica `r` (a global id), or null when another worker holds it.
  Replica* Local(std::int32_t r) {
    return r >= first_ && r < first_ + static_cast<std::int32_t>(replicas_.size())
               ? &replicas_[static_cast<std::size_t>(r - first_)]
               : nullptr;
  }
  // The variables a replica computes with: its own, or the host's for CentralStorage.
  const ParameterList<float>& Weights(const Replica& replica) const {
    return central() ? host_params_ : replica.params;
  }
  // With a worker group: makes `values` (one slice per replica, replica r's at
  // [offsets[r], offsets[r+1])) whole on every worker from each worker's slices.
  template <typename T>
  Status ShareSlices(std::vector<T>& values, const std::vector<std::int64_t>& offsets, std::string_view what,
                     std::int64_t step);
  // The step's compute, loss code and gradient reduction: one pipeline over the two
  // accumulator types. `Word` is float in fast mode (float gradients, SUM or MEAN
  // all-reduced) and std::int64_t in exact mode (accumulator words, SUM all-reduced,
  // rounded once). Leaves the reduced gradient in every replica's `flat` (replica 0's
  // only for CentralStorage) and returns the reduced loss.
  // Gathers `per_replica`'s examples and sizes the step buffers; InvalidArgument if
  // it does not have one batch per replica.
  StatusOr<StepLayout> GatherStep(const ImageDataset& data, const ReplicaBatches& per_replica);
  // Shares the per-example losses and predictions across workers and updates every
  // replica's accuracy with its examples.
  Status ShareExamplesAndCount(const StepLayout& layout, std::int64_t step);
  // Runtime if the step's loss is not finite, naming an empty replica's NaN.
  static Status CheckStepLoss(const StepResult& result, std::int64_t step, std::int64_t epoch);
  // One step of an epoch's loop: step `index` (0-based) of the epoch, the run's
  // 1-based `step`; sets *batch to the step's examples per replica (valid until the
  // next call) and fills *reduced_gradient when it is not null.
  using EpochStep = std::function<StatusOr<StepResult>(
      std::int64_t index, std::int64_t step, ParameterList<float>* reduced_gradient, const ReplicaBatches** batch)>;
  // An epoch's loop (cluster_epoch.cc): steps request.first_step .. steps_in_epoch - 1,
  // each by `train`, until max_steps or a stop request; the outcome as TrainEpoch's.
  StatusOr<EpochOutcome> RunEpoch(const EpochRequest& request, std::int64_t steps_in_epoch, const EpochStep& train,
                                  const std::function<Status(const EngineStep&)>& on_step);
  // The epoch of an accumulating cluster (cluster_accumulation.cc).
  StatusOr<EpochOutcome> TrainAccumulatedEpoch(const EpochRequest& request,
                                               const std::function<Status(const EngineStep&)>& on_step);
  template <typename Word>
  StatusOr<float> ComputeAndReduce(const StepLayout& layout, const std::vector<LossCode::LossScale>& scales,
                                   std::int64_t step, StepResult& result);
  // ComputeAndReduce's parts. ComputeReplicas: every local replica's forward and
  // backward passes into its `grads`/`flat` (fast) or `words` (exact), its loss
  // (into result.replica_losses) and, when `regularize`, its regularization share;
  // returns every replica's loss sum (shared across workers). `loss_batches[r]` is
  // the local batch replica r's loss code sees (its layout.batch_sizes[r] in a plain step):
  // an empty replica's loss is NaN only where that is empty. Where the cluster
  // compacts (CompactsGradients), each replica's encoding becomes its gradient, and
  // where it folds, the sum of the waves; with `adds_to_held` (a later micro-batch of
  // an accumulated step), each is added to what it held. ReducedLoss:
  // strategy.reduce of the replicas' losses. ReduceGradients: the collective of the
  // `flat`/`words` buffers, rounded once in exact mode.
  template <typename Word>
  StatusOr<std::vector<ReplicaLossSum<Word>>> ComputeReplicas(const StepLayout& layout,
                                                              const std::vector<std::int64_t>& loss_batches,
                                                              const std::vector<LossCode::LossScale>& scales,
                                                              std::int64_t step, bool regularize, StepResult& result,
                                                              bool adds_to_held = false);
  template <typename LossSum>
  float ReducedLoss(const std::vector<LossSum>& sums, const std::vector<float>& replica_losses) const;
  template <typename Word>
  Status ReduceGradients(std::int64_t step);
  // After a step's reduction: the reduced gradient (replica 0's `flat`) copied into
  // `reduced_gradient` when it is not null, and the step as the reference check
  // reads it, whose examples images_ and labels_ hold (`examples`: their data set
  // indices, which key their dropout masks).
  void CopyReducedGradient(ParameterList<float>* reduced_gradient) const;
  ReferenceStep::Distributed ReferenceInput(const StepResult& result, std::span<const float> per_example_loss,
                                            std::span<const std::int64_t> batch_sizes,
                                            std::span<const std::int64_t> examples, std::int64_t global_batch_size,
                                            std::int64_t step) const;
  // TrainAccumulatedStep's micro-batches for the one type of word.
  template <typename Word>
  StatusOr<float> AccumulateGroup(const ImageDataset& data, std::span<const ReplicaBatches* const> group,
                                  std::int64_t global_batch_size, std::int64_t step, StepResult& result);
  // The collective of the replicas' `Word` buffers: the worker group's all-reduce
  // across MPI ranks, a reduce to replica 0 for CentralStorage, else an all-reduce.
  template <typename Word>
  Status ReduceAcrossReplicas(ReduceOp op, std::int64_t step);
  // Exact mode's compact all-reduce of the replicas' words into their flat gradients.
  Status ReduceCompactly(std::int64_t step);
  CollectiveOptions Options(std::int64_t step);
  // Runtime "COLLECTIVE at step K: what failed" after an injected fault broke a collective.
  Status CollectiveStatus(const std::string& collective, std::int64_t step) const;
  // Runtime naming the replica, the variables and the step if a replica's gradient
  // holds a NaN or an infinity (before the collective spreads it to every replica).
  // `slot(r)` is local replica r's gradient; replicas [begin, end) are checked.
  // Exact and compacted_, each replica's `compact` must hold its slot's words, encoded:
  // the check reads it.
  Status CheckReplicaGradients(std::int64_t step, const std::vector<std::int64_t>& offsets, std::int32_t begin,
                               std::int32_t end, const std::function<const GradientSlot&(std::int32_t)>& slot);
  // The folded reduction: adds the gradients of the wave's replicas [begin, end)
  // (their slots_, in replica order) to the sum; the first wave starts it (unless
  // `adds_to_held`: an exact accumulated step's later micro-batch), the last divides
  // a fast-mode MEAN.
  template <typename Word>
  void FoldWaveInto(std::int32_t begin, std::int32_t end, bool adds_to_held);
  // The optimizer update with the reduced gradient (CentralStorage: on the host,
  // then broadcast); Runtime if it made a variable non-finite.
  // The optimizer step after the collective; with a dynamic loss scale, each
  // replica applies or skips it as --loss-scale-check says, and result says how.
  Status ApplyUpdate(float learning_rate, std::int64_t step, StepResult& result);
  // With a dynamic loss scale: the replicas' gradients unscaled after the collective.
  void Unscale();
  // The loss scale of this step (1 without one).
  float LossScaleFactor() const;
  // With a dynamic loss scale: the all-reduced gradient holds an inf or a NaN (the
  // step is skipped under --loss-scale-check reduced).
  bool ReducedGradientOverflowed() const;

  const Sequential<float>& model_;
  ClusterConfig config_;
  BatchRunner runner_;
  Status batch_norm_status_;                  // of the last step's BatchNormalization all-reduces (a worker group's)
  std::unique_ptr<ComputeBackend> cpu_;       // runner_ as a compute backend
  ComputeBackend* compute_ = nullptr;         // not owned; null: cpu_
  std::unique_ptr<FaultInjector> faults_;     // with injected faults
  std::unique_ptr<ReferenceStep> reference_;  // with check_reference
  std::vector<Replica> replicas_;             // this process's replicas: global ids [first_, first_ + size)
  // The folded reduction (FoldsReduction): replicas hold no gradient buffers; a wave's
  // gradients are computed into slots_ and added to the sum, replica 0's `flat` (fast
  // mode) or folded_words_ (exact), which folded_grads_ unpacks for every update.
  bool folded_ = false;
  // CompactsGradients: the same waves of slots_, each replica's slot then encoded.
  bool compacted_ = false;
  CompactExactWorkspace compact_workspace_;  // the compact all-reduce's buffers, kept from step to step
  // Exact mode with one replica in one process, unfolded, without accumulation or
  // injected faults: the replica's gradient is its segment's alone, so RunExact
  // rounds it into the replica's `flat` in the pass (ExactSegment::rounded) and its
  // words are scratch; the (one-buffer) collective still runs and is logged.
  bool rounds_in_pass_ = false;
  std::vector<GradientSlot> slots_;
  std::vector<std::int64_t> folded_words_;
  ParameterList<float> folded_grads_;
  std::int32_t first_ = 0;
  WorkerGroup* group_ = nullptr;                       // not owned; null in a single-process run
  std::vector<SparseCategoricalAccuracy> accuracies_;  // every replica's, on every worker
  ParameterList<float> host_params_;                   // CentralStorage only
  std::unique_ptr<Optimizer> host_optimizer_;          // CentralStorage only
  MessageLog log_;
  // Step buffers, reused.
  Tensor<float> images_;
  std::vector<std::int32_t> labels_, predictions_;
  std::vector<float> coefficients_, losses_;
  // Gradient accumulation: the group's examples, per-example losses and
  // (micro-batch, replica) sizes for the reference check, and, under the keras
  // rule, the micro-batches carried from an epoch's end into the next epoch.
  std::vector<std::int64_t> group_indices_, group_sizes_;
  std::vector<float> group_losses_;
  std::vector<ReplicaBatches> carried_;
};

/// Copies parameters into one flat buffer (parameter order) and back.
void PackParameters(const ParameterList<float>& params, std::span<float> flat);
void UnpackParameters(std::span<const float> flat, ParameterList<float>& params);

}  // namespace dtlab
