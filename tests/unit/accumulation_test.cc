// Gradient accumulation (sim/engines/accumulation.h): K micro-batches of G against
// one step of K x G (bitwise in exact mode, within the bound in fast mode), the
// keras rule's mean of means and its carry across epochs, checkpoints and resume
// at optimizer-step boundaries, and the configurations that refuse K > 1.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "core/checkpoint_manager.h"
#include "core/mnist.h"
#include "sim/engines/accumulation.h"
#include "sim/training/accumulation_run.h"
#include "sim/training/checkpointing.h"
#include "sim/training/trainer.h"
#include "test_util.h"

namespace dtlab {
namespace {

TEST(GradientAccumulation, CountsOptimizerSteps) {
  GradientAccumulation global{4, AccumulationRule::kGlobal};
  // 10 micro-batches: two groups of 4 and a partial group of 2, applied or dropped.
  EXPECT_EQ(global.StepsInEpoch(10, 0, false), 3);
  EXPECT_EQ(global.StepsInEpoch(10, 0, true), 2);
  EXPECT_EQ(global.CarriedInto(3, 10), 0);
  EXPECT_EQ(global.StepsInEpochs(10, 3, false), 9);
  EXPECT_EQ(global.LossGlobalBatch(16), 64);
  // keras carries the partial group: epochs of 10 micro-batches start 0, 2, 0, 2 in.
  GradientAccumulation keras{4, AccumulationRule::kKeras};
  EXPECT_EQ(keras.CarriedInto(0, 10), 0);
  EXPECT_EQ(keras.CarriedInto(1, 10), 2);
  EXPECT_EQ(keras.CarriedInto(2, 10), 0);
  EXPECT_EQ(keras.StepsInEpoch(10, 0, false), 2);
  EXPECT_EQ(keras.StepsInEpoch(10, 2, false), 3);
  EXPECT_EQ(keras.StepsInEpochs(10, 3, false), 7);  // 30 micro-batches
  EXPECT_EQ(keras.LossGlobalBatch(16), 16);
  EXPECT_EQ(keras.CarriedInto(std::int64_t{1} << 62, (std::int64_t{1} << 62) + 3), 0);  // no overflow
}

TEST(GradientAccumulation, RangeAndNames) {
  EXPECT_TRUE((GradientAccumulation{1}).Validate().ok());
  EXPECT_TRUE((GradientAccumulation{kMaxAccumulationSteps}).Validate().ok());
  for (const std::int64_t bad : {std::int64_t{0}, std::int64_t{-3}, kMaxAccumulationSteps + 1}) {
    const Status status = GradientAccumulation{bad}.Validate();
    EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
    EXPECT_NE(status.message().find("--accumulation-steps must be from 1 to 1024"), std::string::npos);
  }
  EXPECT_EQ(ParseAccumulationRule("keras").value(), AccumulationRule::kKeras);
  EXPECT_EQ(ParseAccumulationRule("GLOBAL").value(), AccumulationRule::kGlobal);
  EXPECT_NE(ParseAccumulationRule("mean").status().message().find("expected one of: global, keras"), std::string::npos);
}

// 96 training and 32 test images of 10x10 in 5 classes: small enough for exact mode
// on seed-cnn, with convolutions, pooling and dense layers.
TrainTestData SmallData() {
  TrainTestData data;
  data.name = "synthetic";
  data.train = MakeSyntheticDataset(96, 10, 10, 5, 3);
  data.test = MakeSyntheticDataset(32, 10, 10, 5, 4);
  return data;
}

TrainConfig SmallConfig() {
  TrainConfig config;
  config.model = "seed-cnn";
  config.epochs = 2;
  config.chunk_size = 16;
  return config;
}

// K micro-batches of G against one step of K x G on one device.
TrainConfig Accumulating(TrainConfig config, std::int32_t replicas, std::int64_t micro, std::int64_t k) {
  config.cluster.strategy = replicas > 1 ? StrategyKind::kMirrored : StrategyKind::kOneDevice;
  config.cluster.replicas = replicas;
  config.global_batch = micro;
  config.cluster.accumulation.steps = k;
  return config;
}

std::string CheckpointBytes(const std::string& directory) {
  const auto latest = CheckpointManager(directory, 0).LatestPath();
  EXPECT_TRUE(latest.ok() && latest->has_value());
  return latest.ok() && latest->has_value() ? testing::ReadFileBytes(**latest) : "";
}

// The promise: in exact mode 4 accumulated micro-batches of 16 give the
// checkpoint of one step of 64, byte for byte, on 1 and on 4 mirrored replicas.
// 96 examples: each epoch a group of 4 micro-batches and a partial group of 2 (32
// examples), which one step of 64 meets as its short last batch.
TEST(GradientAccumulation, ExactMicroBatchesGiveTheCheckpointOfOneStep) {
  const TrainTestData data = SmallData();
  const auto dir = testing::FreshTestDirectory();
  TrainConfig base = SmallConfig();
  base.cluster.math = MathMode::kExact;
  base.cluster.check_reference = true;
  TrainConfig one_step = Accumulating(base, 1, 64, 1);
  one_step.checkpoint_dir = (dir / "one-step").string();
  const auto expected = Train(one_step, data);
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  EXPECT_EQ(expected->steps, 4);
  for (const std::int32_t replicas : {1, 4}) {
    TrainConfig config = Accumulating(base, replicas, 16, 4);
    config.checkpoint_dir = (dir / ("accumulated-" + std::to_string(replicas))).string();
    const auto report = Train(config, data);
    ASSERT_TRUE(report.ok()) << report.status().message();
    EXPECT_EQ(report->steps, 4) << "optimizer steps";
    ASSERT_TRUE(report->reference_check.has_value());
    EXPECT_TRUE(report->reference_check->within_bound) << report->reference_check->first_failure;
    EXPECT_EQ(report->weights_digest, expected->weights_digest) << replicas << " replicas";
    EXPECT_EQ(CheckpointBytes(config.checkpoint_dir), CheckpointBytes(one_step.checkpoint_dir))
        << replicas << " replicas: the checkpoints differ";
    EXPECT_EQ(report->epochs.back().train_loss, expected->epochs.back().train_loss);
    EXPECT_EQ(report->epochs.back().train_accuracy, expected->epochs.back().train_accuracy);
  }
}

// With --drop-remainder the global rule drops an epoch's partial group, as a batch
// of K x G with drop_remainder drops its short last batch: the same bits again.
TEST(GradientAccumulation, DropRemainderDropsThePartialGroup) {
  const TrainTestData data = SmallData();
  TrainConfig base = SmallConfig();
  base.cluster.math = MathMode::kExact;
  base.drop_remainder = true;
  const auto one_step = Train(Accumulating(base, 1, 64, 1), data);
  const auto accumulated = Train(Accumulating(base, 2, 16, 4), data);
  ASSERT_TRUE(one_step.ok()) << one_step.status().message();
  ASSERT_TRUE(accumulated.ok()) << accumulated.status().message();
  EXPECT_EQ(accumulated->steps, 2);  // one group of 4 per epoch; the 2 micro-batches left are dropped
  EXPECT_EQ(accumulated->steps, one_step->steps);
  EXPECT_EQ(accumulated->weights_digest, one_step->weights_digest);
}

// Fast mode: float sums in micro-batch order, every step within the bound of one
// device on the whole group, for each synchronous strategy.
TEST(GradientAccumulation, FastModeStaysWithinTheBound) {
  const TrainTestData data = SmallData();
  struct Case {
    StrategyKind strategy;
    std::int32_t replicas, workers;
  };
  for (const Case c : {Case{StrategyKind::kOneDevice, 1, 1}, Case{StrategyKind::kMirrored, 3, 1},
                       Case{StrategyKind::kCentralStorage, 2, 1}, Case{StrategyKind::kTpu, 4, 1},
                       Case{StrategyKind::kMultiWorkerMirrored, 4, 2}}) {
    TrainConfig config = Accumulating(SmallConfig(), c.replicas, 20, 3);
    config.cluster.strategy = c.strategy;
    config.cluster.workers = c.workers;
    config.cluster.check_reference = true;
    const auto report = Train(config, data);
    ASSERT_TRUE(report.ok()) << StrategyName(c.strategy) << ": " << report.status().message();
    // 96 examples in micro-batches of 20: 5 (the last of 16), groups of 3 and 2.
    EXPECT_EQ(report->steps, 4) << StrategyName(c.strategy);
    EXPECT_TRUE(report->reference_check->within_bound)
        << StrategyName(c.strategy) << ": " << report->reference_check->first_failure;
  }
}

// The keras rule with Keras's fit loss (sum_over_batch_size): each micro-batch's
// mean, the mean of those. The short micro-batch of 16 among 20s weighs more than
// in one step on the whole group, and the check says so; with only full
// micro-batches it equals the global rule within the bound.
TEST(GradientAccumulation, KerasRuleIsAMeanOfMeans) {
  const TrainTestData data = SmallData();
  TrainConfig config = Accumulating(SmallConfig(), 1, 24, 4);  // 96 = 4 x 24: one full group per epoch
  config.cluster.accumulation.rule = AccumulationRule::kKeras;
  config.cluster.reduction = LossReduction::kSumOverBatchSize;
  config.cluster.check_reference = true;
  const auto full = Train(config, data);
  ASSERT_TRUE(full.ok()) << full.status().message();
  EXPECT_TRUE(full->reference_check->within_bound) << full->reference_check->first_failure;

  config.global_batch = 20;  // 20, 20, 20, 20 | 16 carried: groups of 20 x 4, then 16 + 20 x 3
  config.cluster.accumulation.steps = 4;
  config.epochs = 3;  // 15 micro-batches: 3 optimizer steps, 3 micro-batches left over
  const auto short_one = Train(config, data);
  ASSERT_TRUE(short_one.ok()) << short_one.status().message();
  EXPECT_EQ(short_one->steps, 3);
  ASSERT_EQ(short_one->epochs.size(), 3u);
  EXPECT_EQ(short_one->epochs[0].steps, 1);  // 5 micro-batches: one step, one carried
  EXPECT_EQ(short_one->epochs[1].steps, 1);  // 1 + 5: one step, two carried
  EXPECT_EQ(short_one->epochs[2].steps, 1);  // 2 + 5: one step, three left at the end
  const ReferenceCheckSummary& check = *short_one->reference_check;
  EXPECT_FALSE(check.within_bound);
  EXPECT_EQ(check.first_failed_step, 2) << "the group that holds the short micro-batch";
  EXPECT_NE(check.first_failure.find("a mean of means"), std::string::npos) << check.first_failure;
  // 16 + 3 x 20 = 76 examples: one of the 16 weighs 76 / (4 x 16) of its share.
  EXPECT_NE(check.first_failure.find("1.19x"), std::string::npos) << check.first_failure;
}

// A checkpoint is an optimizer step's end; a run stopped there and resumed ends
// with the bits of an uninterrupted run (fast mode, the same configuration).
TEST(GradientAccumulation, ResumeContinuesAtTheNextGroup) {
  const TrainTestData data = SmallData();
  const auto dir = testing::FreshTestDirectory();
  TrainConfig config = Accumulating(SmallConfig(), 2, 12, 3);  // 8 micro-batches: groups 3, 3, 2
  config.epochs = 2;
  config.checkpoint_every = 1;
  config.checkpoint_dir = (dir / "whole").string();
  const auto whole = Train(config, data);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(whole->steps, 6);
  for (const std::int64_t stop : {1, 2, 3, 4}) {
    TrainConfig first = config;
    first.checkpoint_dir = (dir / ("stopped-" + std::to_string(stop))).string();
    first.max_steps = stop;
    ASSERT_TRUE(Train(first, data).ok());
    TrainConfig second = first;
    second.max_steps = -1;
    const auto resumed = Train(second, data);
    ASSERT_TRUE(resumed.ok()) << resumed.status().message();
    EXPECT_EQ(resumed->resumed_from_step, stop);
    EXPECT_EQ(resumed->weights_digest, whole->weights_digest) << "stopped after step " << stop;
    EXPECT_EQ(CheckpointBytes(second.checkpoint_dir), CheckpointBytes(config.checkpoint_dir));
  }
}

TEST(GradientAccumulation, CheckpointsRecordTheOptimizerStep) {
  TrainConfig config = Accumulating(SmallConfig(), 4, 16, 4);
  auto recorded = RecordedSettings(config);
  EXPECT_EQ(recorded.at("dtlab.global_batch"), "64");
  EXPECT_EQ(recorded.at("dtlab.accumulation_steps"), "4");
  EXPECT_FALSE(recorded.count("dtlab.accumulation"));
  config.cluster.math = MathMode::kExact;  // exact mode: K is layout, as the replicas are
  recorded = RecordedSettings(config);
  EXPECT_EQ(recorded.at("dtlab.global_batch"), "64");
  EXPECT_FALSE(recorded.count("dtlab.accumulation_steps"));
  config.cluster.accumulation.rule = AccumulationRule::kKeras;  // which changes the numbers
  EXPECT_EQ(RecordedSettings(config).at("dtlab.accumulation"), "keras");
  const TrainConfig plain = Accumulating(SmallConfig(), 4, 16, 1);  // no accumulation: as before
  EXPECT_FALSE(RecordedSettings(plain).count("dtlab.accumulation_steps"));
  EXPECT_EQ(RecordedSettings(plain).at("dtlab.global_batch"), "16");
}

TEST(GradientAccumulation, ResumeReportsAChangedAccumulation) {
  const TrainTestData data = SmallData();
  const auto dir = testing::FreshTestDirectory();
  TrainConfig config = Accumulating(SmallConfig(), 1, 16, 2);
  config.checkpoint_dir = dir.string();
  config.max_steps = 1;
  ASSERT_TRUE(Train(config, data).ok());
  config.cluster.accumulation.steps = 1;
  config.max_steps = 3;
  const auto resumed = Train(config, data);
  ASSERT_TRUE(resumed.ok()) << resumed.status().message();
  ASSERT_TRUE(resumed->resume.has_value());
  bool reported = false;
  for (const auto& change : resumed->resume->changes)
    reported |= change.setting == "accumulation_steps" && change.checkpoint == "2" && change.run == "1";
  EXPECT_TRUE(reported);
  // 32 examples taken: the run goes on at micro-batch... step 2 of 16.
  EXPECT_EQ(resumed->resume->position.step_in_epoch, 2);
  EXPECT_EQ(resumed->resume->checkpoint_global_batch, 32);
}

TEST(GradientAccumulation, RefusedWhereItCannotRun) {
  const TrainTestData data = SmallData();
  auto refused = [&](const TrainConfig& config, const std::string& text) {
    const auto report = Train(config, data);
    ASSERT_FALSE(report.ok());
    EXPECT_EQ(report.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(report.status().message().find(text), std::string::npos) << report.status().message();
  };
  TrainConfig ps = Accumulating(SmallConfig(), 2, 16, 2);
  ps.cluster.strategy = StrategyKind::kParameterServer;
  ps.cluster.workers = 2;
  refused(ps, "parameter_server workers push every batch's gradient");
  TrainConfig faults = Accumulating(SmallConfig(), 2, 16, 2);
  faults.cluster.faults.push_back(ParseFaultSpec("die:replica=1,step=1").value());
  refused(faults, "--inject-fault with --accumulation-steps 2");
  refused(Accumulating(SmallConfig(), 1, 16, 0), "--accumulation-steps must be from 1 to 1024, got 0");
  refused(Accumulating(SmallConfig(), 1, kMaxGlobalBatch / 2, 3), "the optimizer step's batch");
  // keras carries a partial group, which no checkpoint holds.
  const auto dir = testing::FreshTestDirectory();
  TrainConfig keras = Accumulating(SmallConfig(), 1, 20, 4);  // 5 micro-batches per epoch
  keras.cluster.accumulation.rule = AccumulationRule::kKeras;
  keras.checkpoint_dir = dir.string();
  refused(keras, "which --accumulation-steps 4 does not divide");
  keras.cluster.accumulation.steps = 5;
  const auto fine = Train(keras, data);
  EXPECT_TRUE(fine.ok()) << fine.status().message();
}

TEST(GradientAccumulation, LastStepCountsOptimizerSteps) {
  TrainConfig config = Accumulating(SmallConfig(), 1, 16, 4);
  config.epochs = 3;
  EXPECT_EQ(LastStep(config, 96), 6);  // 6 micro-batches: 2 steps per epoch
  config.drop_remainder = true;
  EXPECT_EQ(LastStep(config, 96), 3);  // the partial group dropped
  config.drop_remainder = false;
  config.cluster.accumulation.rule = AccumulationRule::kKeras;
  EXPECT_EQ(LastStep(config, 96), 4);  // 18 micro-batches, carried across epochs
  EXPECT_EQ(OptimizerStepsInEpoch(config, 0, 6), 1);
  EXPECT_EQ(OptimizerStepsInEpoch(config, 1, 6), 2);
  config.max_steps = 3;
  EXPECT_EQ(LastStep(config, 96), 3);
}

}  // namespace
}  // namespace dtlab
