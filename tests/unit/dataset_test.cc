// Tests of Pipeline: exact tf.data semantics of each stage, determinism, and
// RapidCheck properties over random pipelines.
#include "core/dataset.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace dtlab {
namespace {

using Items = std::vector<std::vector<std::int64_t>>;

// The items of an unbatched stream as one flat list.
std::vector<std::int64_t> Flatten(const Items& items) {
  std::vector<std::int64_t> flat;
  for (const auto& item : items) flat.insert(flat.end(), item.begin(), item.end());
  return flat;
}

std::vector<std::int64_t> Range(std::int64_t begin, std::int64_t end) {
  std::vector<std::int64_t> values(static_cast<std::size_t>(end - begin));
  std::iota(values.begin(), values.end(), begin);
  return values;
}

bool IsPermutationOfRange(std::vector<std::int64_t> values, std::int64_t n) {
  std::sort(values.begin(), values.end());
  return values == Range(0, n);
}

TEST(PipelineTest, RangeYieldsOneIndexPerItem) {
  const Pipeline pipeline(4);
  EXPECT_EQ(pipeline.Iterate(0), (Items{{0}, {1}, {2}, {3}}));
  EXPECT_FALSE(pipeline.batched());
  EXPECT_EQ(pipeline.Describe(), "range(4)");
  EXPECT_TRUE(Pipeline(0).Iterate(0).empty());
}

TEST(PipelineTest, Batch) {
  Pipeline pipeline(8);
  ASSERT_TRUE(pipeline.Batch(3).ok());
  EXPECT_TRUE(pipeline.batched());
  EXPECT_EQ(pipeline.Iterate(0), (Items{{0, 1, 2}, {3, 4, 5}, {6, 7}}));
  EXPECT_EQ(pipeline.Describe(), "range(8).batch(3)");
}

TEST(PipelineTest, BatchDropRemainder) {
  Pipeline pipeline(8);
  ASSERT_TRUE(pipeline.Batch(3, /*drop_remainder=*/true).ok());
  EXPECT_EQ(pipeline.Iterate(0), (Items{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(pipeline.Describe(), "range(8).batch(3, drop_remainder=true)");
  Pipeline exact(6);
  ASSERT_TRUE(exact.Batch(3, /*drop_remainder=*/true).ok());
  EXPECT_EQ(exact.Iterate(0), (Items{{0, 1, 2}, {3, 4, 5}}));
}

TEST(PipelineTest, Shard) {
  Pipeline pipeline(10);
  ASSERT_TRUE(pipeline.Shard(3, 1).ok());
  EXPECT_EQ(pipeline.Iterate(0), (Items{{1}, {4}, {7}}));
  EXPECT_EQ(pipeline.Describe(), "range(10).shard(3, 1)");
}

TEST(PipelineTest, ShardAfterBatchShardsBatches) {
  Pipeline pipeline(10);
  ASSERT_TRUE(pipeline.Batch(2).ok());
  ASSERT_TRUE(pipeline.Shard(2, 0).ok());
  EXPECT_EQ(pipeline.Iterate(0), (Items{{0, 1}, {4, 5}, {8, 9}}));
}

TEST(PipelineTest, Take) {
  Pipeline pipeline(10);
  ASSERT_TRUE(pipeline.Take(3).ok());
  EXPECT_EQ(pipeline.Iterate(0), (Items{{0}, {1}, {2}}));
  Pipeline batches(10);
  ASSERT_TRUE(batches.Batch(4).ok());
  ASSERT_TRUE(batches.Take(2).ok());
  EXPECT_EQ(batches.Iterate(0), (Items{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  Pipeline more(3);
  ASSERT_TRUE(more.Take(100).ok());
  EXPECT_EQ(more.Iterate(0).size(), 3u);
  Pipeline none(3);
  ASSERT_TRUE(none.Take(0).ok());
  EXPECT_TRUE(none.Iterate(0).empty());
  EXPECT_EQ(pipeline.Describe(), "range(10).take(3)");
}

TEST(PipelineTest, Repeat) {
  Pipeline pipeline(3);
  ASSERT_TRUE(pipeline.Repeat(2).ok());
  EXPECT_EQ(pipeline.Iterate(0), (Items{{0}, {1}, {2}, {0}, {1}, {2}}));
  ASSERT_TRUE(pipeline.Batch(4).ok());
  EXPECT_EQ(pipeline.Iterate(0), (Items{{0, 1, 2, 0}, {1, 2}}));
  EXPECT_EQ(pipeline.Describe(), "range(3).repeat(2).batch(4)");
}

TEST(PipelineTest, BatchThenRepeatKeepsShortBatches) {
  Pipeline pipeline(5);
  ASSERT_TRUE(pipeline.Batch(2).ok());
  ASSERT_TRUE(pipeline.Repeat(2).ok());
  EXPECT_EQ(pipeline.Iterate(0), (Items{{0, 1}, {2, 3}, {4}, {0, 1}, {2, 3}, {4}}));
}

TEST(PipelineTest, ShuffleWithFullBufferIsAPermutation) {
  Pipeline pipeline(100);
  ASSERT_TRUE(pipeline.Shuffle(100, /*seed=*/42).ok());
  const std::vector<std::int64_t> epoch0 = Flatten(pipeline.Iterate(0));
  const std::vector<std::int64_t> epoch1 = Flatten(pipeline.Iterate(1));
  EXPECT_TRUE(IsPermutationOfRange(epoch0, 100));
  EXPECT_TRUE(IsPermutationOfRange(epoch1, 100));
  EXPECT_NE(epoch0, Range(0, 100));
  EXPECT_NE(epoch0, epoch1);
  EXPECT_EQ(epoch0, Flatten(pipeline.Iterate(0)));  // pure function of the epoch
  EXPECT_EQ(pipeline.Describe(), "range(100).shuffle(100, seed=42)");

  Pipeline same(100);
  ASSERT_TRUE(same.Shuffle(100, 42).ok());
  EXPECT_EQ(Flatten(same.Iterate(1)), epoch1);
  Pipeline other_seed(100);
  ASSERT_TRUE(other_seed.Shuffle(100, 43).ok());
  EXPECT_NE(Flatten(other_seed.Iterate(0)), epoch0);
}

TEST(PipelineTest, ShuffleWithBufferOneIsTheIdentity) {
  Pipeline pipeline(20);
  ASSERT_TRUE(pipeline.Shuffle(1, 5).ok());
  EXPECT_EQ(Flatten(pipeline.Iterate(0)), Range(0, 20));
  EXPECT_EQ(Flatten(pipeline.Iterate(3)), Range(0, 20));
}

TEST(PipelineTest, SmallBufferOnlyMovesItemsLocally) {
  // With buffer b, item p is emitted no earlier than position p - b + 1.
  Pipeline pipeline(200);
  ASSERT_TRUE(pipeline.Shuffle(4, 9).ok());
  const std::vector<std::int64_t> order = Flatten(pipeline.Iterate(0));
  ASSERT_TRUE(IsPermutationOfRange(order, 200));
  EXPECT_NE(order, Range(0, 200));
  for (std::size_t position = 0; position < order.size(); ++position) {
    EXPECT_LE(order[position], static_cast<std::int64_t>(position) + 3);
  }
}

TEST(PipelineTest, ShuffleWithoutReshuffleRepeatsItsOrder) {
  Pipeline pipeline(50);
  ASSERT_TRUE(pipeline.Shuffle(50, 3, /*reshuffle_each_iteration=*/false).ok());
  const std::vector<std::int64_t> epoch0 = Flatten(pipeline.Iterate(0));
  EXPECT_NE(epoch0, Range(0, 50));
  EXPECT_EQ(Flatten(pipeline.Iterate(1)), epoch0);
  EXPECT_EQ(Flatten(pipeline.Iterate(7)), epoch0);
  ASSERT_TRUE(pipeline.Repeat(2).ok());
  const std::vector<std::int64_t> repeated = Flatten(pipeline.Iterate(0));
  EXPECT_EQ(std::vector<std::int64_t>(repeated.begin(), repeated.begin() + 50), epoch0);
  EXPECT_EQ(std::vector<std::int64_t>(repeated.begin() + 50, repeated.end()), epoch0);
  EXPECT_EQ(pipeline.Describe(), "range(50).shuffle(50, seed=3, reshuffle_each_iteration=false).repeat(2)");
}

TEST(PipelineTest, RepeatReshufflesEachPassAndMapsIterations) {
  Pipeline shuffled(30);
  ASSERT_TRUE(shuffled.Shuffle(30, 11).ok());
  Pipeline repeated = shuffled;
  ASSERT_TRUE(repeated.Repeat(3).ok());
  // Iteration e of repeat(3) is upstream iterations 3e, 3e+1, 3e+2.
  for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::int64_t> expected;
    for (std::int64_t r = 0; r < 3; ++r) {
      const std::vector<std::int64_t> pass = Flatten(shuffled.Iterate(epoch * 3 + r));
      expected.insert(expected.end(), pass.begin(), pass.end());
    }
    EXPECT_EQ(Flatten(repeated.Iterate(epoch)), expected);
  }
  const std::vector<std::int64_t> all = Flatten(repeated.Iterate(0));
  EXPECT_NE(std::vector<std::int64_t>(all.begin(), all.begin() + 30),
            std::vector<std::int64_t>(all.begin() + 30, all.begin() + 60));
}

TEST(PipelineTest, ShuffleAfterBatchShufflesWholeBatches) {
  Pipeline pipeline(12);
  ASSERT_TRUE(pipeline.Batch(3).ok());
  ASSERT_TRUE(pipeline.Shuffle(4, 1).ok());
  Items batches = pipeline.Iterate(0);
  ASSERT_EQ(batches.size(), 4u);
  std::sort(batches.begin(), batches.end());
  EXPECT_EQ(batches, (Items{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10, 11}}));
}

TEST(PipelineTest, ShuffleStreamsDependOnStageNumber) {
  // The same seed in two stages gives two different streams of draws.
  Pipeline one(40);
  ASSERT_TRUE(one.Shuffle(40, 5).ok());
  Pipeline two(40);
  ASSERT_TRUE(two.Take(40).ok());
  ASSERT_TRUE(two.Shuffle(40, 5).ok());
  EXPECT_NE(Flatten(one.Iterate(0)), Flatten(two.Iterate(0)));
}

// Their speed is measured in bench/pipeline_bench.cc, not here.
TEST(PipelineTest, TypicalTrainingPipeline) {
  Pipeline pipeline(60000);
  ASSERT_TRUE(pipeline.Shuffle(60000, 1).ok());
  ASSERT_TRUE(pipeline.Batch(64).ok());
  EXPECT_EQ(pipeline.Describe(), "range(60000).shuffle(60000, seed=1).batch(64)");
  const Items batches = pipeline.Iterate(0);
  ASSERT_EQ(batches.size(), 938u);  // 937 full batches and one of 32
  EXPECT_EQ(batches.back().size(), 32u);
  EXPECT_TRUE(IsPermutationOfRange(Flatten(batches), 60000));
}

TEST(PipelineTest, UnbatchedEpochIsAPermutation) {
  Pipeline pipeline(60000);
  ASSERT_TRUE(pipeline.Shuffle(60000, 1).ok());
  const Items items = pipeline.Iterate(0);
  ASSERT_EQ(items.size(), 60000u);
  Items sorted = items;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(items, sorted);                                  // shuffled ...
  EXPECT_TRUE(IsPermutationOfRange(Flatten(items), 60000));  // ... and nothing lost
}

TEST(PipelineTest, BadArgumentsAreInvalidArgument) {
  Pipeline pipeline(10);
  EXPECT_EQ(pipeline.Shuffle(0, 1).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(pipeline.Batch(0).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(pipeline.Repeat(0).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(pipeline.Take(-1).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(pipeline.Shard(0, 0).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(pipeline.Shard(3, 3).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(pipeline.Shard(3, -1).code(), Status::Code::kInvalidArgument);
  const Status bad_shard = pipeline.Shard(3, 5);
  EXPECT_NE(bad_shard.message().find("[0, 3)"), std::string::npos) << bad_shard.message();
  // Failed calls add no stages.
  EXPECT_EQ(pipeline.Describe(), "range(10)");
  ASSERT_TRUE(pipeline.Batch(2).ok());
  const Status twice = pipeline.Batch(2);
  EXPECT_EQ(twice.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(twice.message().find("already batched"), std::string::npos) << twice.message();
  EXPECT_EQ(pipeline.Describe(), "range(10).batch(2)");
}

// Properties over random pipelines.

RC_GTEST_PROP(PipelineProperty, ShuffleBatchCoversEveryElementOncePerEpoch, ()) {
  const auto n = *rc::gen::inRange<std::int64_t>(0, 500);
  const auto buffer = *rc::gen::inRange<std::int64_t>(1, 600);
  const auto batch = *rc::gen::inRange<std::int64_t>(1, 70);
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  const auto epoch = *rc::gen::inRange<std::int64_t>(0, 1000);
  Pipeline pipeline(n);
  RC_ASSERT(pipeline.Shuffle(buffer, seed).ok());
  RC_ASSERT(pipeline.Batch(batch).ok());
  const Items batches = pipeline.Iterate(epoch);
  RC_ASSERT(IsPermutationOfRange(Flatten(batches), n));
  RC_ASSERT(static_cast<std::int64_t>(batches.size()) == (n + batch - 1) / batch);
  for (std::size_t i = 0; i < batches.size(); ++i) {
    if (i + 1 < batches.size()) {
      RC_ASSERT(static_cast<std::int64_t>(batches[i].size()) == batch);
    } else {
      RC_ASSERT(!batches[i].empty());
      RC_ASSERT(static_cast<std::int64_t>(batches[i].size()) <= batch);
    }
  }
  RC_ASSERT(pipeline.Iterate(epoch) == batches);
}

RC_GTEST_PROP(PipelineProperty, DropRemainderGivesOnlyFullBatches, ()) {
  const auto n = *rc::gen::inRange<std::int64_t>(0, 300);
  const auto batch = *rc::gen::inRange<std::int64_t>(1, 40);
  Pipeline pipeline(n);
  RC_ASSERT(pipeline.Shuffle(*rc::gen::inRange<std::int64_t>(1, 400), 17).ok());
  RC_ASSERT(pipeline.Batch(batch, /*drop_remainder=*/true).ok());
  const Items batches = pipeline.Iterate(*rc::gen::inRange<std::int64_t>(0, 50));
  RC_ASSERT(static_cast<std::int64_t>(batches.size()) == n / batch);
  std::vector<std::int64_t> flat = Flatten(batches);
  for (const auto& b : batches) RC_ASSERT(static_cast<std::int64_t>(b.size()) == batch);
  std::sort(flat.begin(), flat.end());
  RC_ASSERT(std::adjacent_find(flat.begin(), flat.end()) == flat.end());
}

RC_GTEST_PROP(PipelineProperty, ShardsPartitionTheElements, ()) {
  const auto n = *rc::gen::inRange<std::int64_t>(0, 400);
  const auto shards = *rc::gen::inRange<std::int64_t>(1, 9);
  const auto buffer = *rc::gen::inRange<std::int64_t>(1, 500);
  const auto batch = *rc::gen::inRange<std::int64_t>(1, 20);
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  const auto epoch = *rc::gen::inRange<std::int64_t>(0, 100);
  const bool shard_first = *rc::gen::arbitrary<bool>();
  std::vector<std::int64_t> all;
  for (std::int64_t index = 0; index < shards; ++index) {
    // Shuffle with a shared seed, then shard (or shard, then shuffle per shard).
    Pipeline pipeline(n);
    if (shard_first) {
      RC_ASSERT(pipeline.Shard(shards, index).ok());
      RC_ASSERT(pipeline.Shuffle(buffer, seed).ok());
    } else {
      RC_ASSERT(pipeline.Shuffle(buffer, seed).ok());
      RC_ASSERT(pipeline.Shard(shards, index).ok());
    }
    RC_ASSERT(pipeline.Batch(batch).ok());
    const Items batches = pipeline.Iterate(epoch);
    const std::vector<std::int64_t> mine = Flatten(batches);
    // Shard sizes differ by at most one element.
    RC_ASSERT(static_cast<std::int64_t>(mine.size()) == (n - index + shards - 1) / shards);
    all.insert(all.end(), mine.begin(), mine.end());
  }
  RC_ASSERT(IsPermutationOfRange(all, n));
}

RC_GTEST_PROP(PipelineProperty, RepeatCoversEveryElementOncePerPass, ()) {
  const auto n = *rc::gen::inRange<std::int64_t>(1, 200);
  const auto count = *rc::gen::inRange<std::int64_t>(1, 5);
  const auto buffer = *rc::gen::inRange<std::int64_t>(1, 250);
  Pipeline pipeline(n);
  RC_ASSERT(pipeline.Shuffle(buffer, *rc::gen::arbitrary<std::uint64_t>()).ok());
  RC_ASSERT(pipeline.Repeat(count).ok());
  const std::vector<std::int64_t> flat = Flatten(pipeline.Iterate(*rc::gen::inRange<std::int64_t>(0, 100)));
  RC_ASSERT(static_cast<std::int64_t>(flat.size()) == n * count);
  for (std::int64_t pass = 0; pass < count; ++pass) {
    RC_ASSERT(
        IsPermutationOfRange(std::vector<std::int64_t>(flat.begin() + pass * n, flat.begin() + (pass + 1) * n), n));
  }
}

RC_GTEST_PROP(PipelineProperty, TakeKeepsAPrefix, ()) {
  const auto n = *rc::gen::inRange<std::int64_t>(0, 200);
  const auto take = *rc::gen::inRange<std::int64_t>(0, 250);
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  Pipeline full(n);
  RC_ASSERT(full.Shuffle(50, seed).ok());
  Pipeline taken = full;
  RC_ASSERT(taken.Take(take).ok());
  const Items all = full.Iterate(2);
  const Items prefix = taken.Iterate(2);
  RC_ASSERT(static_cast<std::int64_t>(prefix.size()) == std::min(n, take));
  RC_ASSERT(std::equal(prefix.begin(), prefix.end(), all.begin()));
}

}  // namespace
}  // namespace dtlab
