// The tf.distribute API shape, and the seed's worked Mean-metric example run through
// the real strategy, loss-scaling and metric code.
#include <gtest/gtest.h>

#include "core/loss.h"
#include "core/metrics.h"
#include "sim/engines/distribution_strategy.h"

namespace dtlab {
namespace {

TEST(DistributionStrategy, MeanMetricTrapWorkedExample) {
  // Per-replica losses [2, 3] and [4, 5], global batch 4 (docs/semantics.md).
  for (auto algorithm : {AllReduceAlgorithm::kRing, AllReduceAlgorithm::kHalvingDoubling, AllReduceAlgorithm::kNaive,
                         AllReduceAlgorithm::kDirect}) {
    DistributionStrategy strategy(StrategyKind::kMirrored, 2, algorithm);
    const PerReplica<std::vector<float>> per_example{{{2, 3}, {4, 5}}};
    const PerReplica<float> scaled = strategy.Run(
        [](const ReplicaContext& context, const std::vector<float>& losses) {
          EXPECT_EQ(context.num_replicas_in_sync, 2);
          return ComputeAverageLoss<float>(losses, {}, /*global_batch_size=*/4);
        },
        per_example);
    EXPECT_EQ(strategy.ExperimentalLocalResults(scaled), (std::vector<float>{1.25f, 2.25f}));
    EXPECT_EQ(strategy.Reduce(ReduceOp::kSum, scaled), 3.5f);  // the true mean of 2, 3, 4, 5
    EXPECT_EQ(strategy.Reduce(ReduceOp::kMean, scaled), 1.75f);
    // The trap: a Mean metric fed the two scaled losses reads 1.75, not 3.5.
    MeanMetric mean;
    const auto local = strategy.ExperimentalLocalResults(scaled);
    mean.UpdateState(local);
    EXPECT_EQ(mean.Result(), 1.75f);
    // The right read of a metric across replicas sums the states of per-replica metrics.
    const PerReplica<MeanMetric> metrics = strategy.Run(
        [](const ReplicaContext&, const std::vector<float>& losses) {
          MeanMetric m;
          m.UpdateState(losses);
          return m;
        },
        per_example);
    MeanMetric merged;
    for (const auto& m : strategy.ExperimentalLocalResults(metrics)) merged.Merge(m);
    EXPECT_EQ(merged.Result(), 3.5f);
  }
}

TEST(DistributionStrategy, RunGivesEachReplicaItsContext) {
  DistributionStrategy strategy(StrategyKind::kMirrored, 5);
  const PerReplica<int> args{{10, 20, 30, 40, 50}};
  const PerReplica<int> out =
      strategy.Run([](const ReplicaContext& c, const int& x) { return x + c.replica_id_in_sync_group; }, args);
  EXPECT_EQ(out.values, (std::vector<int>{10, 21, 32, 43, 54}));
  EXPECT_EQ(strategy.num_replicas_in_sync(), 5);
}

}  // namespace
}  // namespace dtlab

namespace dtlab {
namespace {

TEST(DistributionStrategy, ReplicaContextAllReduceInsideTheStep) {
  // Each replica normalizes its values by the global sum, which needs an all-reduce
  // in the middle of the step function; two rounds check that replicas resume in step.
  for (std::int32_t n : {1, 2, 3, 7, 64}) {
    DistributionStrategy strategy(StrategyKind::kMirrored, n, AllReduceAlgorithm::kHalvingDoubling);
    PerReplica<float> args;
    for (std::int32_t r = 0; r < n; ++r) args.values.push_back(static_cast<float>(r + 1));
    auto result = strategy.RunWithCollectives(
        [](ReplicaContext& ctx, const float& x) -> ReplicaStep<float> {
          const float total = co_await ctx.AllReduce(ReduceOp::kSum, x);
          std::vector<float> pair(2);  // (GCC 12 cannot hold a braced list across co_await)
          pair[0] = x * 2;
          pair[1] = 1.0f;
          const std::vector<float> both = co_await ctx.AllReduce(ReduceOp::kSum, std::move(pair));
          co_return total + both[0] + both[1] * 1000.0f;
        },
        args);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    const float sum = static_cast<float>(n * (n + 1) / 2);
    for (const float v : result->values) EXPECT_EQ(v, sum + 2 * sum + 1000.0f * static_cast<float>(n)) << n;
  }
}

TEST(DistributionStrategy, MismatchedCollectivesAreAnErrorNotAHang) {
  DistributionStrategy strategy(StrategyKind::kMirrored, 3);
  const PerReplica<int> args{{0, 1, 2}};
  auto early_exit = strategy.RunWithCollectives(
      [](ReplicaContext& ctx, const int& r) -> ReplicaStep<float> {
        if (r == 1) co_return 0.0f;  // replica 1 skips the collective
        const float total = co_await ctx.AllReduce(ReduceOp::kSum, 1.0f);
        co_return total;
      },
      args);
  ASSERT_FALSE(early_exit.ok());
  EXPECT_NE(early_exit.status().message().find("finished their step while 2 wait in all-reduce #1"), std::string::npos)
      << early_exit.status().message();
  auto sizes = strategy.RunWithCollectives(
      [](ReplicaContext& ctx, const int& r) -> ReplicaStep<float> {
        auto v = co_await ctx.AllReduce(ReduceOp::kSum, std::vector<float>(static_cast<std::size_t>(r + 1), 1.0f));
        co_return v[0];
      },
      args);
  ASSERT_FALSE(sizes.ok());
  EXPECT_NE(sizes.status().message().find("replica 1 asks all-reduce #1 for 2 values"), std::string::npos);
}

}  // namespace
}  // namespace dtlab
