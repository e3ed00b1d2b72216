// Distributed input: which element indices each replica gets at each step, as
// tf.distribute deals a tf.data pipeline to W workers x R replicas.
//
// Two entry points, as in TF:
// - DistributedDataset::DistributeDataset is
//   `strategy.experimental_distribute_dataset(range(n).shuffle(b, seed).batch(G, d))`:
//   TF rebatches every global batch into per-replica batches and, with several
//   workers, applies an AutoShardPolicy (tensorflow/python/distribute/input_lib.py,
//   DistributedDataset._create_cloned_datasets_from_dataset and _make_rebatch_fn).
// - DistributedDataset::DistributeDatasetsFromFunction is
//   `strategy.distribute_datasets_from_function(dataset_fn)`: dataset_fn builds one
//   already-batched pipeline per worker; TF neither rebatches nor shards it
//   (input_lib.py, _create_datasets_from_function_with_input_context).
//
// The rules, each confirmed in TF's source (docs/semantics.md, "Distributed
// input", has worked examples):
// - V2 rebatch (RebatchDatasetV2, kernel in
//   tensorflow/core/kernels/data/experimental/rebatch_dataset_op.cc) cuts the
//   element stream into batches whose sizes cycle through
//   `batch_sizes_for_worker(G, W, R, w)` (tensorflow/python/data/experimental/ops/
//   distribute.py): of the W*R sizes the first G mod (W*R) are ceil(G/(W*R)), the
//   rest floor, rotated left by w*R for worker w. A short final batch fills the
//   slots in order; a slot of size 0 yields an empty batch.
// - Legacy rebatch (_LegacyRebatchDataset, RebatchDatasetOp in the same kernel
//   file) cuts each input batch of b elements into N = W*R chunks of ceil(b/N),
//   b being that batch's own size, so tail chunks may be short or empty.
// - AutoShardPolicy (tensorflow/core/grappler/optimizers/data/auto_shard.cc,
//   ApplyAutoShard): OFF does nothing (every worker sees all data); FILE fails on
//   range() (RangeDataset is an unshardable source) unless there is one worker, in
//   which case it is skipped; DATA inserts shard(W, w) after the rebatch and
//   rewrites V2 to legacy (RewriteRebatchV2ToV1); AUTO tries FILE, which fails on
//   range(), and falls back to DATA -- also with one worker; HINT only rewrites
//   shard(SHARD_HINT, ...) stages, and this pipeline has none, so it does nothing.
// - Each worker's batches go round-robin to its R replicas (the MultiDeviceIterator
//   in tensorflow/core/kernels/data/multi_device_iterator_ops.cc): item j goes to
//   local replica j mod R at step j div R.
// - A step happens while any replica in the cluster has a value
//   (DistributedIteratorBase.get_next, _calculate_replicas_with_values); replicas
//   without one get an empty batch. A zero-size batch that the rebatcher produced
//   counts as a value, so under OFF with G < W*R a step can be empty everywhere.
//
// Consequence worth knowing: for this dataset the default policy AUTO applies DATA,
// so even one worker splits batches by the legacy rule; V2 shows only under OFF,
// HINT or FILE (one worker). The distributed-input tutorial's prose says
// otherwise; its own examples match the source (see docs/semantics.md).
//
// Thread safety: a DistributedDataset is immutable after construction; const
// methods may be called concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dataset.h"
#include "core/status.h"

namespace dtlab {

/// How a global batch is cut into per-replica batches.
enum class RebatchRule {
  kV2,      // "v2": RebatchDatasetV2 with batch_sizes_for_worker sizes
  kLegacy,  // "legacy": _LegacyRebatchDataset, ceil(b/N) per replica
};
/// Parses "v2" or "legacy" (case-insensitive).
StatusOr<RebatchRule> ParseRebatchRule(std::string_view name);
std::string_view RebatchRuleName(RebatchRule rule);

/// tf.data.experimental.AutoShardPolicy (tensorflow/python/data/ops/options.py).
enum class AutoShardPolicy { kOff, kAuto, kFile, kData, kHint };
/// Parses "off", "auto", "file", "data" or "hint" (case-insensitive).
StatusOr<AutoShardPolicy> ParseAutoShardPolicy(std::string_view name);
std::string_view AutoShardPolicyName(AutoShardPolicy policy);

/// How the run's dataset reaches the replicas: strategy.experimental_distribute_dataset
/// of the globally batched dataset (rebatched per replica), or
/// strategy.distribute_datasets_from_function of a dataset_fn that shards and
/// batches by context.get_per_replica_batch_size (no rebatch).
enum class InputApi { kDistributeDataset, kFromFunction };
/// Parses "dataset" or "function" (case-insensitive).
StatusOr<InputApi> ParseInputApi(std::string_view name);
std::string_view InputApiName(InputApi api);

/// The policy TF applies to experimental_distribute_dataset(range(n).shuffle().batch())
/// on `num_workers` workers (auto_shard.cc): AUTO becomes DATA (its FILE attempt finds
/// no files), DATA stays DATA, OFF, HINT and FILE are kept as given (FILE on several
/// workers is refused by DistributeDataset).
AutoShardPolicy AppliedShardPolicy(AutoShardPolicy requested);
/// The rebatch rule in force: DATA sharding rewrites RebatchDatasetV2 into the legacy
/// RebatchDataset (RewriteRebatchV2ToV1), even on one worker; otherwise `requested`.
RebatchRule EffectiveRebatchRule(RebatchRule requested, AutoShardPolicy requested_policy);

/// TF's `batch_sizes_for_worker(G, W, R, w)` (distribute.py): the W*R batch sizes
/// worker `worker_index` cycles through. Example: G=7, W=2, R=2 gives [2,2,2,1]
/// for worker 0 and [2,1,2,2] for worker 1.
/// REQUIRES: global_batch_size >= 0, num_workers >= 1, replicas_per_worker >= 1,
/// 0 <= worker_index < num_workers.
std::vector<std::int64_t> BatchSizesForWorker(std::int64_t global_batch_size, std::int32_t num_workers,
                                              std::int32_t replicas_per_worker, std::int32_t worker_index);

/// The per-replica sizes of one full global batch of `global_batch_size` split over
/// `num_replicas` replicas. V2: the first G mod N get ceil(G/N), the rest floor
/// (G=10, N=4: [3,3,2,2]). Legacy: ceil(G/N) each until the batch runs out
/// (G=4, N=3: [2,2,0]).
/// REQUIRES: global_batch_size >= 0, num_replicas >= 1.
std::vector<std::int64_t> ReplicaBatchSizes(std::int64_t global_batch_size, std::int32_t num_replicas,
                                            RebatchRule rule);

/// Splits one global batch's element indices (possibly a short final batch) into
/// `num_replicas` per-replica batches, in replica order, as TF's rebatchers do on
/// one worker. V2 fills replica i with the next ReplicaBatchSizes(G, N, kV2)[i]
/// elements while any are left. Legacy gives each replica ceil(b/N) where b is
/// this batch's own size (RebatchDatasetOp computes the chunk from the input's
/// batch dimension), so a short final batch is spread thinner, not packed into
/// the first replicas. Examples, range(10).batch(4) on 3 replicas:
///   V2:     [0,1],[2],[3]   [4,5],[6],[7]   [8,9],[],[]
///   legacy: [0,1],[2,3],[]  [4,5],[6,7],[]  [8],[9],[]
/// REQUIRES: global_batch_size >= batch.size(), num_replicas >= 1.
std::vector<std::vector<std::int64_t>> SplitBatch(std::span<const std::int64_t> batch, std::int64_t global_batch_size,
                                                  std::int32_t num_replicas, RebatchRule rule);

/// tf.distribute.InputContext (tensorflow/python/distribute/distribute_lib.py):
/// what dataset_fn learns about its input pipeline.
struct InputContext {
  std::int32_t num_input_pipelines = 1;
  std::int32_t input_pipeline_id = 0;
  std::int32_t num_replicas_in_sync = 1;

  /// global_batch_size / num_replicas_in_sync. Returns InvalidArgument, with TF's
  /// message ("The `global_batch_size` 10 is not divisible by
  /// `num_replicas_in_sync` 4"), if it does not divide evenly, and if
  /// num_replicas_in_sync < 1.
  StatusOr<std::int64_t> GetPerReplicaBatchSize(std::int64_t global_batch_size) const;
};

/// What DistributeDataset distributes, and how.
struct DistributedInputOptions {
  std::int64_t num_elements = 0;       // range(num_elements)
  std::int64_t global_batch_size = 1;  // batch(global_batch_size, drop_remainder)
  bool drop_remainder = false;
  std::int64_t shuffle_buffer = 0;  // 0: no shuffle; else shuffle(shuffle_buffer, seed) before batch
  std::uint64_t seed = 0;
  std::int32_t num_workers = 1;
  std::int32_t replicas_per_worker = 1;
  /// The rebatcher input_lib's _make_rebatch_fn installs: V2 when
  /// compute_batch_size can read the batch size statically (true for this
  /// pipeline, hence the default), legacy when it cannot. DATA sharding (and AUTO,
  /// which falls back to DATA here) rewrites V2 to legacy regardless.
  RebatchRule rule = RebatchRule::kV2;
  AutoShardPolicy shard_policy = AutoShardPolicy::kAuto;
};

/// The per-replica batches of every step of a distributed dataset.
class DistributedDataset {
 public:
  /// steps -> replicas -> element indices. Replicas are worker-major: replica id =
  /// worker * replicas_per_worker + local replica.
  using Step = std::vector<std::vector<std::int64_t>>;

  /// `strategy.experimental_distribute_dataset(range(n).shuffle(b, seed).batch(G, d))`
  /// on num_workers x replicas_per_worker replicas (see the file comment for the
  /// rules). Returns InvalidArgument if num_elements < 0, global_batch_size < 1,
  /// shuffle_buffer < 0, num_workers or replicas_per_worker < 1, the replica count
  /// does not fit in int32, or the policy is FILE with several workers (TF fails:
  /// range() reads no files). Like TF it accepts a global batch not divisible by
  /// the replica count (also with drop_remainder) and one smaller than the replica
  /// count (some replicas then get empty batches every step).
  static StatusOr<DistributedDataset> DistributeDataset(const DistributedInputOptions& options);

  /// `strategy.distribute_datasets_from_function(dataset_fn)`: calls dataset_fn
  /// once per worker w with InputContext{num_workers, w, num_workers *
  /// replicas_per_worker}; worker w's batches go round-robin to its replicas.
  /// Returns InvalidArgument if num_workers or replicas_per_worker < 1, dataset_fn
  /// is empty, or a returned pipeline is not batched; an error from dataset_fn is
  /// returned with the worker named.
  static StatusOr<DistributedDataset> DistributeDatasetsFromFunction(
      std::int32_t num_workers, std::int32_t replicas_per_worker,
      std::function<StatusOr<Pipeline>(const InputContext&)> dataset_fn);

  /// The steps of epoch `epoch` (a pure function of the dataset and `epoch`; the
  /// shuffle order is the same on every worker). Iteration ends when no replica
  /// has a value. REQUIRES: epoch >= 0.
  std::vector<Step> Iterate(std::int64_t epoch) const;

  std::int32_t num_replicas() const { return num_workers_ * replicas_per_worker_; }
  std::int32_t num_workers() const { return num_workers_; }
  std::int32_t replicas_per_worker() const { return replicas_per_worker_; }

  /// The policy TF ends up applying (AUTO becomes DATA; FILE on one worker and
  /// HINT without shard hints act as OFF but are reported as given). kOff for
  /// DistributeDatasetsFromFunction.
  AutoShardPolicy applied_shard_policy() const { return applied_policy_; }
  /// The rebatch rule in force; nullopt for DistributeDatasetsFromFunction (no
  /// rebatching).
  std::optional<RebatchRule> effective_rule() const { return effective_rule_; }

  /// One line: the pipeline(s), the cluster, the sharding and the split rule, e.g.
  /// "experimental_distribute_dataset(range(8).batch(4)) on 1 worker x 3 replicas:
  /// auto_shard_policy auto (applied: data), rebatch legacy".
  std::string Describe() const;

 private:
  enum class Source { kDataset, kFunction };
  DistributedDataset() = default;

  // The items each worker's iterator yields, in order (see Iterate).
  std::vector<std::vector<std::vector<std::int64_t>>> WorkerStreams(std::int64_t epoch) const;

  Source source_ = Source::kDataset;
  std::int32_t num_workers_ = 1;
  std::int32_t replicas_per_worker_ = 1;
  std::int64_t global_batch_size_ = 1;
  AutoShardPolicy requested_policy_ = AutoShardPolicy::kOff;
  AutoShardPolicy applied_policy_ = AutoShardPolicy::kOff;
  std::optional<RebatchRule> effective_rule_;
  // True when TF handles partial steps (DistributedIteratorBase.get_next with
  // get_next_as_optional): several workers, or element shapes not static. When
  // false, iteration stops at the first step where some replica has no value.
  bool partial_batch_handling_ = true;
  // kDataset: one pipeline, cloned on every worker. kFunction: one per worker.
  std::vector<Pipeline> pipelines_;
};

}  // namespace dtlab
