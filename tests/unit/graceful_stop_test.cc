// A graceful stop (TrainConfig::stop_request, sim/training/trainer.h): the run finishes
// the step in which the request came, saves a checkpoint there, reports the request,
// and a rerun resumes onto the uninterrupted run's bits. parameter_server stops at
// the end of its epoch. --steps ending on an epoch boundary begins no next epoch.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <csignal>
#include <string>
#include <vector>

#include "sim/training/trainer.h"
#include "test_util.h"

namespace dtlab {
namespace {

// 96 examples in global batches of 16: 6 steps an epoch, 12 in 2 epochs.
TrainConfig Config(const std::string& directory) {
  TrainConfig config;
  config.model = "linear";
  config.epochs = 2;
  config.batch_per_replica = 4;
  config.cluster.strategy = StrategyKind::kMirrored;
  config.cluster.replicas = 4;
  config.checkpoint_dir = directory;
  config.max_to_keep = 0;
  return config;
}

// Sets the request (as a signal handler would) when step `at` of the run is done.
class StopAt : public TrainObserver {
 public:
  StopAt(std::atomic<int>& request, std::int64_t at) : request_(request), at_(at) {}
  void OnStart(const std::string&, std::int64_t resumed_from_step) override {
    step_ = std::max<std::int64_t>(resumed_from_step, 0);
  }
  void OnEpochBegin(std::int64_t epoch, float, std::int64_t) override { epochs_begun.push_back(epoch); }
  void OnStep(std::int64_t, std::int64_t, float, float) override {
    if (++step_ == at_) request_.store(SIGINT);
  }
  void OnCheckpoint(const std::string& path) override { checkpoints.push_back(path); }
  std::vector<std::int64_t> epochs_begun;
  std::vector<std::string> checkpoints;

 private:
  std::atomic<int>& request_;
  std::int64_t at_, step_ = 0;
};

TEST(GracefulStop, StopsAfterTheStepSavesItAndResumesOntoTheSameBits) {
  const TrainTestData data = testing::TinyTrainTestData();
  const auto whole_dir = testing::FreshTestDirectory();
  auto whole = Train(Config(whole_dir.string()), data);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->stopped_by, 0);

  const auto dir = testing::FreshTestDirectory();
  std::atomic<int> request{0};
  TrainConfig config = Config(dir.string());
  config.stop_request = &request;
  StopAt observer(request, 4);  // in the middle of epoch 1
  auto stopped = Train(config, data, &observer);
  ASSERT_TRUE(stopped.ok()) << stopped.status().ToString();
  EXPECT_EQ(stopped->stopped_by, SIGINT);
  EXPECT_EQ(stopped->steps, 4);
  EXPECT_TRUE(stopped->epochs.empty());  // the stopped epoch is not evaluated
  ASSERT_EQ(observer.checkpoints.size(), 1u);
  EXPECT_EQ(stopped->last_checkpoint, observer.checkpoints[0]);
  EXPECT_NE(stopped->last_checkpoint.find("ckpt-4."), std::string::npos) << stopped->last_checkpoint;

  request.store(0);  // the rerun: the same command
  auto resumed = Train(config, data);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->resumed_from_step, 4);
  EXPECT_EQ(resumed->steps, 12);
  EXPECT_EQ(resumed->stopped_by, 0);
  EXPECT_EQ(resumed->weights_digest, whole->weights_digest);
}

TEST(GracefulStop, OnTheLastStepOfAnEpochResumesAtItsEnd) {
  const TrainTestData data = testing::TinyTrainTestData();
  const auto whole_dir = testing::FreshTestDirectory();
  auto whole = Train(Config(whole_dir.string()), data);
  ASSERT_TRUE(whole.ok());
  const auto dir = testing::FreshTestDirectory();
  std::atomic<int> request{0};
  TrainConfig config = Config(dir.string());
  config.stop_request = &request;
  StopAt observer(request, 6);
  auto stopped = Train(config, data, &observer);
  ASSERT_TRUE(stopped.ok()) << stopped.status().ToString();
  EXPECT_EQ(stopped->steps, 6);
  config.stop_request = nullptr;
  auto resumed = Train(config, data);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->steps, 12);
  ASSERT_EQ(resumed->epochs.size(), 2u);  // epoch 1's line, then epoch 2's
  EXPECT_EQ(resumed->epochs[0].steps, 0);
  EXPECT_EQ(resumed->weights_digest, whole->weights_digest);
  EXPECT_EQ(resumed->epochs[0].train_loss, whole->epochs[0].train_loss);
  EXPECT_EQ(resumed->epochs[1].test_accuracy, whole->epochs[1].test_accuracy);
}

TEST(GracefulStop, ParameterServerStopsAtTheEndOfItsEpoch) {
  const TrainTestData data = testing::TinyTrainTestData();
  const auto dir = testing::FreshTestDirectory();
  std::atomic<int> request{0};
  TrainConfig config = Config(dir.string());
  config.cluster.strategy = StrategyKind::kParameterServer;
  config.cluster.workers = 4;
  config.stop_request = &request;
  StopAt observer(request, 2);
  auto stopped = Train(config, data, &observer);
  ASSERT_TRUE(stopped.ok()) << stopped.status().ToString();
  EXPECT_EQ(stopped->stopped_by, SIGINT);
  ASSERT_EQ(stopped->epochs.size(), 1u);
  EXPECT_EQ(stopped->steps, stopped->epochs[0].steps);
  EXPECT_EQ(observer.epochs_begun, std::vector<std::int64_t>{1});
}

TEST(GracefulStop, StepsEndingOnAnEpochBoundaryBeginNoNextEpoch) {
  const TrainTestData data = testing::TinyTrainTestData();
  const auto dir = testing::FreshTestDirectory();
  std::atomic<int> never{0};
  TrainConfig config = Config(dir.string());
  // The epochs a run to `steps` begins (resuming from the run before).
  const auto epochs_begun = [&](std::int64_t steps) {
    config.max_steps = steps;
    StopAt observer(never, -1);
    auto report = Train(config, data, &observer);
    EXPECT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_EQ(report.ok() ? report->steps : -1, steps);
    return observer.epochs_begun;
  };
  EXPECT_EQ(epochs_begun(6), std::vector<std::int64_t>{1});
  EXPECT_EQ(epochs_begun(8), std::vector<std::int64_t>{2});  // the rerun goes on with epoch 2
}

}  // namespace
}  // namespace dtlab
