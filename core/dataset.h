// Pipeline: a tf.data-like input pipeline over element indices.
//
// A pipeline starts from the stream of element indices 0 .. num_elements-1
// (tf.data's range(num_elements)) and applies stages in the order they were added:
// Shuffle, Batch, Repeat, Take and Shard, each with tf.data's semantics. It yields
// items; an item is a list of element indices: one index before Batch, a whole
// batch after it. Callers gather the data for the indices (see core/batch.h).
//
// Iterate(iteration) is a pure function of the pipeline and the iteration number,
// so any epoch's order can be regenerated on its own, on any replica, in any
// order. Shuffle stage number s (0-based among the added stages) draws its
// numbers for upstream iteration u from
//   CounterRng(seed, RngPurpose::kShuffle, s * 2^32 + (reshuffle ? u : 0)).
// Iteration e of a Repeat(c) stage makes upstream iterations e*c + r, r in [0, c).
//
// Example: Pipeline p(60000); p.Shuffle(60000, 1); p.Batch(64);
//          p.Describe() == "range(60000).shuffle(60000, seed=1).batch(64)".
//
// Thread safety: const methods may be called concurrently; the methods that add
// stages must not run concurrently with anything else on the same pipeline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace dtlab {

class Pipeline {
 public:
  /// The stream 0, 1, ..., num_elements-1. A negative count is taken as 0.
  explicit Pipeline(std::int64_t num_elements);

  /// Adds tf.data's buffered shuffle: fill a buffer with the first buffer_size
  /// items; repeatedly emit a uniformly random slot and refill it with the next
  /// input item; at the end emit what is left in random order. With buffer_size
  /// at least the stream length this is a uniform random permutation. If
  /// reshuffle_each_iteration is false every iteration uses the same order.
  /// Returns InvalidArgument if buffer_size < 1.
  Status Shuffle(std::int64_t buffer_size, std::uint64_t seed, bool reshuffle_each_iteration = true);

  /// Adds grouping of consecutive items into batches of batch_size (their index
  /// lists concatenated). The last batch may be short unless drop_remainder.
  /// Returns InvalidArgument if batch_size < 1 or the pipeline is already batched.
  Status Batch(std::int64_t batch_size, bool drop_remainder = false);

  /// Adds `count` passes over the stages so far, each a new upstream iteration.
  /// Returns InvalidArgument if count < 1.
  Status Repeat(std::int64_t count);

  /// Adds keeping only the first `count` items. Returns InvalidArgument if count < 0.
  Status Take(std::int64_t count);

  /// Adds keeping the items whose position p in the stream has p % num_shards ==
  /// index. Returns InvalidArgument unless num_shards >= 1 and 0 <= index < num_shards.
  Status Shard(std::int64_t num_shards, std::int64_t index);

  /// The items of iteration (epoch) `iteration`, in order. The same pipeline and
  /// iteration always give the same result. REQUIRES: iteration >= 0.
  std::vector<std::vector<std::int64_t>> Iterate(std::int64_t iteration) const;

  /// True once Batch has been added.
  bool batched() const { return batched_; }

  /// The number of element indices in the source stream.
  std::int64_t num_elements() const { return num_elements_; }

  /// The pipeline in tf.data notation, e.g.
  /// "range(60000).shuffle(60000, seed=1).batch(64)". Non-default flags are shown
  /// ("batch(64, drop_remainder=true)", "shuffle(10, seed=1, reshuffle_each_iteration=false)").
  std::string Describe() const;

 private:
  enum class StageKind { kShuffle, kBatch, kRepeat, kTake, kShard };
  struct Stage {
    StageKind kind;
    std::int64_t size = 0;   // buffer_size, batch_size, repeat/take count, num_shards
    std::int64_t index = 0;  // shard index
    std::uint64_t seed = 0;  // shuffle seed
    bool flag = false;       // reshuffle_each_iteration or drop_remainder
  };
  struct Stream;

  // The stream after the first `num_stages` stages, for the given iteration.
  Stream Run(std::size_t num_stages, std::uint64_t iteration) const;

  std::int64_t num_elements_;
  std::vector<Stage> stages_;
  bool batched_ = false;
};

}  // namespace dtlab
