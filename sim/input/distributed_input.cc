#include "sim/input/distributed_input.h"

#include "core/enum_names.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <limits>
#include <utility>

namespace dtlab {

namespace {

using Item = std::vector<std::int64_t>;
using Stream = std::vector<Item>;

std::int64_t CeilDiv(std::int64_t dividend, std::int64_t divisor) { return (dividend + divisor - 1) / divisor; }

// RebatchDatasetOp (legacy) on one input batch: num_chunks slices of
// ceil(b / num_chunks) elements, b = batch.size(); the tail slices are short or
// empty (rebatch_dataset_op.cc: `interval = CeilDiv(original_batch_dim,
// num_replicas)`, `if (start >= end) start = end`).
Stream LegacyChunks(std::span<const std::int64_t> batch, std::int64_t num_chunks) {
  const auto b = static_cast<std::int64_t>(batch.size());
  const std::int64_t interval = CeilDiv(b, num_chunks);
  Stream chunks(static_cast<std::size_t>(num_chunks));
  for (std::int64_t i = 0; i < num_chunks; ++i) {
    const std::int64_t start = std::min(interval * i, b);
    const std::int64_t end = std::min(start + interval, b);
    chunks[static_cast<std::size_t>(i)].assign(batch.begin() + start, batch.begin() + end);
  }
  return chunks;
}

// RebatchDatasetV2Op's iterator over the input batches `batches`, with
// drop_remainder=false (input_lib calls dataset.rebatch(batch_sizes)): output j
// takes sizes[j mod L] elements from the element stream, across input-batch
// boundaries; a short output ends the sequence; a desired size of 0 yields an
// empty batch as long as the end of the input has not been observed; a positive
// desired size that finds no input ends the sequence.
Stream V2Rebatch(const Stream& batches, std::span<const std::int64_t> sizes) {
  Stream outputs;
  std::size_t next_batch = 0;
  const Item* current = nullptr;
  std::int64_t offset = -1;  // -1: no current input batch
  bool end_of_input = false;
  std::size_t size_index = 0;
  while (!end_of_input) {
    const std::int64_t desired = sizes[size_index];
    Item output;
    while (static_cast<std::int64_t>(output.size()) < desired) {
      if (offset == -1) {
        if (next_batch == batches.size()) {
          end_of_input = true;
          break;
        }
        current = &batches[next_batch++];
        offset = 0;
      }
      const auto current_size = static_cast<std::int64_t>(current->size());
      const std::int64_t slice_end =
          std::min(offset + desired - static_cast<std::int64_t>(output.size()), current_size);
      output.insert(output.end(), current->begin() + offset, current->begin() + slice_end);
      offset = slice_end;
      if (offset == current_size) offset = -1;
    }
    size_index = (size_index + 1) % sizes.size();
    if (output.empty() && desired > 0) break;  // end_of_sequence
    outputs.push_back(std::move(output));
  }
  return outputs;
}

Stream Flatten(const std::vector<Stream>& streams_per_batch) {
  Stream flat;
  for (const Stream& s : streams_per_batch) flat.insert(flat.end(), s.begin(), s.end());
  return flat;
}

// Whether a batched pipeline's elements have a static batch dimension, as
// _is_statically_shaped in input_lib.py sees it: batch(..., drop_remainder=True).
// Pipeline::Describe() documents that non-default flags are shown.
bool HasStaticBatchDimension(const Pipeline& pipeline) {
  return pipeline.Describe().find("drop_remainder=true") != std::string::npos;
}

std::string Plural(std::int64_t count, const char* noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

}  // namespace

namespace {
constexpr NameTable<InputApi, 2> kInputApis = {
    {{"dataset", InputApi::kDistributeDataset}, {"function", InputApi::kFromFunction}}};
constexpr NameTable<RebatchRule, 2> kRebatchRules = {{{"v2", RebatchRule::kV2}, {"legacy", RebatchRule::kLegacy}}};
constexpr NameTable<AutoShardPolicy, 5> kShardPolicies = {{
    {"off", AutoShardPolicy::kOff},
    {"auto", AutoShardPolicy::kAuto},
    {"file", AutoShardPolicy::kFile},
    {"data", AutoShardPolicy::kData},
    {"hint", AutoShardPolicy::kHint},
}};
}  // namespace

StatusOr<InputApi> ParseInputApi(std::string_view name) { return ParseEnumName(name, kInputApis, "input API"); }
std::string_view InputApiName(InputApi api) { return EnumName(api, kInputApis); }

StatusOr<RebatchRule> ParseRebatchRule(std::string_view name) {
  return ParseEnumName(name, kRebatchRules, "rebatch rule");
}
std::string_view RebatchRuleName(RebatchRule rule) { return EnumName(rule, kRebatchRules); }

StatusOr<AutoShardPolicy> ParseAutoShardPolicy(std::string_view name) {
  return ParseEnumName(name, kShardPolicies, "auto-shard policy");
}
std::string_view AutoShardPolicyName(AutoShardPolicy policy) { return EnumName(policy, kShardPolicies); }

AutoShardPolicy AppliedShardPolicy(AutoShardPolicy requested) {
  // auto_shard.cc, OptimizeGraph / ApplyAutoShard, for range(n).shuffle().batch():
  // FILE is skipped with one worker (and fails at RangeDataset with several); AUTO's
  // FILE attempt fails the same way and falls back to DATA; HINT finds no
  // shard(SHARD_HINT, ...) and changes nothing.
  return requested == AutoShardPolicy::kAuto ? AutoShardPolicy::kData : requested;
}

RebatchRule EffectiveRebatchRule(RebatchRule requested, AutoShardPolicy requested_policy) {
  return AppliedShardPolicy(requested_policy) == AutoShardPolicy::kData ? RebatchRule::kLegacy : requested;
}

// distribute.py, batch_sizes_for_worker: worker_0 = [floor+1] * num_ceil +
// [floor] * (N - num_ceil); worker w gets worker_0[w*R:] + worker_0[:w*R].
std::vector<std::int64_t> BatchSizesForWorker(std::int64_t global_batch_size, std::int32_t num_workers,
                                              std::int32_t replicas_per_worker, std::int32_t worker_index) {
  assert(global_batch_size >= 0 && num_workers >= 1 && replicas_per_worker >= 1);
  assert(worker_index >= 0 && worker_index < num_workers);
  const std::int64_t num_subbatches = static_cast<std::int64_t>(num_workers) * replicas_per_worker;
  const std::int64_t floor = global_batch_size / num_subbatches;
  const std::int64_t num_ceil = global_batch_size - num_subbatches * floor;
  std::vector<std::int64_t> worker_0(static_cast<std::size_t>(num_subbatches), floor);
  for (std::int64_t i = 0; i < num_ceil; ++i) worker_0[static_cast<std::size_t>(i)] = floor + 1;
  const std::int64_t offset = static_cast<std::int64_t>(worker_index) * replicas_per_worker;
  std::rotate(worker_0.begin(), worker_0.begin() + offset, worker_0.end());
  return worker_0;
}

std::vector<std::int64_t> ReplicaBatchSizes(std::int64_t global_batch_size, std::int32_t num_replicas,
                                            RebatchRule rule) {
  assert(global_batch_size >= 0 && num_replicas >= 1);
  if (rule == RebatchRule::kV2) return BatchSizesForWorker(global_batch_size, 1, num_replicas, 0);
  const std::int64_t interval = CeilDiv(global_batch_size, num_replicas);
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(num_replicas));
  for (std::int32_t i = 0; i < num_replicas; ++i) {
    sizes[static_cast<std::size_t>(i)] = std::clamp<std::int64_t>(global_batch_size - interval * i, 0, interval);
  }
  return sizes;
}

std::vector<std::vector<std::int64_t>> SplitBatch(std::span<const std::int64_t> batch, std::int64_t global_batch_size,
                                                  std::int32_t num_replicas, RebatchRule rule) {
  assert(num_replicas >= 1 && static_cast<std::int64_t>(batch.size()) <= global_batch_size);
  if (rule == RebatchRule::kLegacy) return LegacyChunks(batch, num_replicas);
  const std::vector<std::int64_t> sizes = ReplicaBatchSizes(global_batch_size, num_replicas, RebatchRule::kV2);
  std::vector<std::vector<std::int64_t>> split(static_cast<std::size_t>(num_replicas));
  std::size_t next = 0;
  for (std::size_t i = 0; i < split.size(); ++i) {
    const std::size_t take = std::min(static_cast<std::size_t>(sizes[i]), batch.size() - next);
    split[i].assign(batch.begin() + static_cast<std::ptrdiff_t>(next),
                    batch.begin() + static_cast<std::ptrdiff_t>(next + take));
    next += take;
  }
  return split;
}

StatusOr<std::int64_t> InputContext::GetPerReplicaBatchSize(std::int64_t global_batch_size) const {
  if (num_replicas_in_sync < 1) {
    return Status::InvalidArgument("InputContext: num_replicas_in_sync must be at least 1, got " +
                                   std::to_string(num_replicas_in_sync));
  }
  // distribute_lib.py, InputContext.get_per_replica_batch_size (a ValueError in TF).
  if (global_batch_size % num_replicas_in_sync != 0) {
    return Status::InvalidArgument("The `global_batch_size` " + std::to_string(global_batch_size) +
                                   " is not divisible by `num_replicas_in_sync` " +
                                   std::to_string(num_replicas_in_sync) +
                                   "; choose a global batch size that is a multiple of the replica count");
  }
  return global_batch_size / num_replicas_in_sync;
}

namespace {

Status CheckCluster(std::int32_t num_workers, std::int32_t replicas_per_worker) {
  if (num_workers < 1) {
    return Status::InvalidArgument("num_workers must be at least 1, got " + std::to_string(num_workers));
  }
  if (replicas_per_worker < 1) {
    return Status::InvalidArgument("replicas_per_worker must be at least 1, got " +
                                   std::to_string(replicas_per_worker));
  }
  if (static_cast<std::int64_t>(num_workers) * replicas_per_worker > std::numeric_limits<std::int32_t>::max()) {
    return Status::InvalidArgument("num_workers x replicas_per_worker (" + std::to_string(num_workers) + " x " +
                                   std::to_string(replicas_per_worker) + ") exceeds the int32 replica count");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<DistributedDataset> DistributedDataset::DistributeDataset(const DistributedInputOptions& options) {
  if (options.num_elements < 0) {
    return Status::InvalidArgument("num_elements must be at least 0, got " + std::to_string(options.num_elements));
  }
  if (options.global_batch_size < 1) {
    return Status::InvalidArgument("global_batch_size must be at least 1, got " +
                                   std::to_string(options.global_batch_size) +
                                   " (the dataset is batched by the global batch size; TF splits each batch "
                                   "across the replicas)");
  }
  if (options.shuffle_buffer < 0) {
    return Status::InvalidArgument("shuffle_buffer must be at least 0 (0: no shuffle), got " +
                                   std::to_string(options.shuffle_buffer));
  }
  DTLAB_RETURN_IF_ERROR(CheckCluster(options.num_workers, options.replicas_per_worker));

  DistributedDataset dataset;
  dataset.source_ = Source::kDataset;
  dataset.num_workers_ = options.num_workers;
  dataset.replicas_per_worker_ = options.replicas_per_worker;
  dataset.global_batch_size_ = options.global_batch_size;
  dataset.requested_policy_ = options.shard_policy;

  // The policy and the rule TF applies (AppliedShardPolicy, EffectiveRebatchRule).
  if (options.shard_policy == AutoShardPolicy::kFile && options.num_workers > 1) {
    return Status::InvalidArgument(
        "auto_shard_policy FILE cannot shard range(" + std::to_string(options.num_elements) + ") across " +
        std::to_string(options.num_workers) +
        " workers: TensorFlow's auto-shard rewrite fails with NotFoundError \"Found an unshardable source "
        "dataset: RangeDataset\" (auto_shard.cc, RecursivelyHandleOp) because the pipeline reads no files; "
        "use DATA (or AUTO, which falls back to DATA) to shard by element, or OFF to give every worker all "
        "the data");
  }
  dataset.applied_policy_ = AppliedShardPolicy(options.shard_policy);
  // With one replica in sync input_lib does not rebatch at all; both rules then give
  // the whole batch to the replica.
  dataset.effective_rule_ = EffectiveRebatchRule(options.rule, options.shard_policy);
  // _enable_get_next_as_optional: partial batches are handled in multi-worker
  // mode or when the dataset's shapes are not static (no drop_remainder).
  dataset.partial_batch_handling_ = options.num_workers > 1 || !options.drop_remainder;

  Pipeline pipeline(options.num_elements);
  if (options.shuffle_buffer > 0) DTLAB_RETURN_IF_ERROR(pipeline.Shuffle(options.shuffle_buffer, options.seed));
  DTLAB_RETURN_IF_ERROR(pipeline.Batch(options.global_batch_size, options.drop_remainder));
  dataset.pipelines_.push_back(std::move(pipeline));
  return dataset;
}

StatusOr<DistributedDataset> DistributedDataset::DistributeDatasetsFromFunction(
    std::int32_t num_workers, std::int32_t replicas_per_worker,
    std::function<StatusOr<Pipeline>(const InputContext&)> dataset_fn) {
  DTLAB_RETURN_IF_ERROR(CheckCluster(num_workers, replicas_per_worker));
  if (!dataset_fn) {
    return Status::InvalidArgument(
        "distribute_datasets_from_function: dataset_fn is empty; pass a function that "
        "returns the batched pipeline for an InputContext");
  }
  DistributedDataset dataset;
  dataset.source_ = Source::kFunction;
  dataset.num_workers_ = num_workers;
  dataset.replicas_per_worker_ = replicas_per_worker;
  dataset.requested_policy_ = AutoShardPolicy::kOff;
  dataset.applied_policy_ = AutoShardPolicy::kOff;
  for (std::int32_t worker = 0; worker < num_workers; ++worker) {
    const InputContext context{num_workers, worker, num_workers * replicas_per_worker};
    StatusOr<Pipeline> pipeline = dataset_fn(context);
    if (!pipeline.ok()) {
      return pipeline.status().WithContext("dataset_fn for input pipeline " + std::to_string(worker));
    }
    if (!pipeline->batched()) {
      return Status::InvalidArgument(
          "distribute_datasets_from_function: the pipeline dataset_fn returned for input pipeline " +
          std::to_string(worker) + " (" + pipeline->Describe() +
          ") is not batched; each of its items goes to one replica, so batch it by the per-replica batch size, "
          "e.g. Batch(context.GetPerReplicaBatchSize(global_batch_size))");
    }
    dataset.pipelines_.push_back(std::move(pipeline).value());
  }
  // _enable_get_next_as_optional looks at the first worker's dataset.
  dataset.partial_batch_handling_ = num_workers > 1 || !HasStaticBatchDimension(dataset.pipelines_[0]);
  return dataset;
}

std::vector<std::vector<std::vector<std::int64_t>>> DistributedDataset::WorkerStreams(std::int64_t epoch) const {
  const auto workers = static_cast<std::size_t>(num_workers_);
  std::vector<Stream> streams(workers);
  if (source_ == Source::kFunction) {
    for (std::size_t w = 0; w < workers; ++w) streams[w] = pipelines_[w].Iterate(epoch);
    return streams;
  }
  // Every worker runs the same pipeline with the same seed, so the same batches.
  const Stream batches = pipelines_[0].Iterate(epoch);
  const std::int64_t num_replicas_in_sync = static_cast<std::int64_t>(num_workers_) * replicas_per_worker_;
  if (num_replicas_in_sync == 1) {
    // input_lib: no rebatch_fn when num_replicas_in_sync is 1.
    streams[0] = batches;
    return streams;
  }
  if (effective_rule_ == RebatchRule::kLegacy) {
    std::vector<Stream> per_batch;
    per_batch.reserve(batches.size());
    for (const Item& batch : batches) per_batch.push_back(LegacyChunks(batch, num_replicas_in_sync));
    const Stream legacy = Flatten(per_batch);
    if (applied_policy_ == AutoShardPolicy::kData) {
      // ShardByData: shard(num_workers, index) after the rebatch: worker w keeps
      // the items at positions p with p mod W == w.
      for (std::size_t p = 0; p < legacy.size(); ++p) streams[p % workers].push_back(legacy[p]);
    } else {
      for (std::size_t w = 0; w < workers; ++w) streams[w] = legacy;
    }
    return streams;
  }
  for (std::int32_t w = 0; w < num_workers_; ++w) {
    const std::vector<std::int64_t> sizes =
        BatchSizesForWorker(global_batch_size_, num_workers_, replicas_per_worker_, w);
    streams[static_cast<std::size_t>(w)] = V2Rebatch(batches, sizes);
  }
  return streams;
}

std::vector<DistributedDataset::Step> DistributedDataset::Iterate(std::int64_t epoch) const {
  const std::vector<Stream> streams = WorkerStreams(epoch);
  const auto r = static_cast<std::size_t>(replicas_per_worker_);
  std::vector<Step> steps;
  for (std::size_t step = 0;; ++step) {
    // MultiDeviceIterator: item j of a worker goes to local replica j mod R.
    const std::size_t first = step * r;
    bool any_value = false;
    bool all_values = true;
    for (const Stream& stream : streams) {
      any_value = any_value || first < stream.size();
      all_values = all_values && first + r <= stream.size();
    }
    if (!any_value) break;
    // Without partial-batch handling, get_next raises OutOfRange (ending the
    // loop) as soon as one replica has no value.
    if (!partial_batch_handling_ && !all_values) break;
    Step replicas;
    replicas.reserve(streams.size() * r);
    for (const Stream& stream : streams) {
      for (std::size_t k = 0; k < r; ++k) {
        replicas.push_back(first + k < stream.size() ? stream[first + k] : Item{});
      }
    }
    steps.push_back(std::move(replicas));
  }
  return steps;
}

std::string DistributedDataset::Describe() const {
  const std::string cluster = " on " + Plural(num_workers_, "worker") + " x " + Plural(replicas_per_worker_, "replica");
  if (source_ == Source::kFunction) {
    std::string text = "distribute_datasets_from_function" + cluster + ":";
    for (std::size_t w = 0; w < pipelines_.size(); ++w) {
      text += " [worker " + std::to_string(w) + "] " + pipelines_[w].Describe();
    }
    return text + "; batches dealt round-robin to each worker's replicas";
  }
  std::string text = "experimental_distribute_dataset(" + pipelines_[0].Describe() + ")" + cluster +
                     ": auto_shard_policy " + std::string(AutoShardPolicyName(requested_policy_));
  if (applied_policy_ != requested_policy_) {
    text += " (applied: " + std::string(AutoShardPolicyName(applied_policy_)) + ")";
  }
  // input_lib installs no rebatch_fn with one replica in sync.
  if (num_replicas() == 1) return text + ", no rebatch (one replica)";
  return text + ", rebatch " + std::string(RebatchRuleName(*effective_rule_));
}

}  // namespace dtlab
