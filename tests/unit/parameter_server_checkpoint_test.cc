// parameter_server checkpoints in the middle of an epoch (sim/engines/parameter_server_epoch.cc,
// sim/training/checkpointing.h): saved at --checkpoint-every and at the end of a --steps run;
// a checkpoint after update K is the uninterrupted run's state after K, bit for bit;
// a resumed run pushes every batch once, equals the uninterrupted run with one
// worker (none is in flight at a checkpoint), and is deterministic with several.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/checkpoint_manager.h"
#include "sim/training/trainer.h"
#include "test_util.h"

namespace dtlab {
namespace {

// 4 workers, each with a shard of 24 examples in batches of 4: 24 updates an epoch.
TrainConfig PsConfig(const std::string& directory, std::int32_t workers = 4) {
  TrainConfig config;
  config.model = "linear";
  config.epochs = 2;
  config.batch_per_replica = 4;
  config.cluster.strategy = StrategyKind::kParameterServer;
  config.cluster.workers = config.cluster.replicas = workers;
  config.checkpoint_dir = directory;
  config.max_to_keep = 0;
  return config;
}

// A run stopped by --steps `steps`: its checkpoint is saved at the end.
void TrainStopped(const std::filesystem::path& directory, std::int64_t steps, const TrainTestData& data,
                  std::int32_t workers = 4) {
  TrainConfig config = PsConfig(directory.string(), workers);
  config.max_steps = steps;
  auto report = Train(config, data);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->steps, steps);
}

class CheckpointPaths : public TrainObserver {
 public:
  void OnCheckpoint(const std::string& path) override { paths.push_back(std::filesystem::path(path).filename()); }
  std::vector<std::string> paths;
};

StatusOr<SafetensorsFile> Latest(const std::filesystem::path& directory) {
  return CheckpointManager(directory.string(), 0).RestoreLatest();
}

TEST(ParameterServerCheckpoints, SavedAtCheckpointEveryAndAtTheEndOfSteps) {
  const auto base = testing::FreshTestDirectory();  // emptied at every call: taken once
  const TrainTestData data = testing::TinyTrainTestData();
  const auto dir = base / "dir";
  TrainConfig config = PsConfig(dir.string());
  config.checkpoint_every = 3;
  config.max_steps = 8;  // in the middle of epoch 1
  CheckpointPaths saved;
  auto report = Train(config, data, &saved);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->steps, 8);
  EXPECT_EQ(saved.paths, (std::vector<std::string>{"ckpt-3.safetensors", "ckpt-6.safetensors", "ckpt-8.safetensors"}));
  EXPECT_EQ(std::filesystem::path(report->last_checkpoint).filename(), "ckpt-8.safetensors");
  auto latest = Latest(dir);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(latest->GetI64("progress/step").value(), std::vector<std::int64_t>{8});
  EXPECT_EQ(latest->GetI64("progress/epoch").value(), std::vector<std::int64_t>{0});
  const std::vector<std::int64_t> pushed = latest->GetI64("progress/worker_batches").value();
  ASSERT_EQ(pushed.size(), 4u);
  EXPECT_EQ(pushed[0] + pushed[1] + pushed[2] + pushed[3], 8);

  // Without --checkpoint-every, the end of the --steps run is saved too.
  const auto plain_dir = base / "plain_dir";
  TrainConfig plain = PsConfig(plain_dir.string());
  plain.max_steps = 5;
  CheckpointPaths plain_saved;
  ASSERT_TRUE(Train(plain, data, &plain_saved).ok());
  EXPECT_EQ(plain_saved.paths, std::vector<std::string>{"ckpt-5.safetensors"});
}

TEST(ParameterServerCheckpoints, ACheckpointIsTheUninterruptedStateAfterItsUpdate) {
  const auto base = testing::FreshTestDirectory();  // emptied at every call: taken once
  const TrainTestData data = testing::TinyTrainTestData();
  const auto stopped_dir = base / "stopped_dir";
  TrainStopped(stopped_dir, 10, data);
  const auto longer_dir = base / "longer_dir";
  TrainConfig longer = PsConfig(longer_dir.string());
  longer.checkpoint_every = 10;
  ASSERT_TRUE(Train(longer, data).ok());  // 2 whole epochs, saved after update 10 on the way
  // The same variables, optimizer slots, counters, metrics and worker positions.
  EXPECT_EQ(testing::ReadFileBytes(stopped_dir / "ckpt-10.safetensors"),
            testing::ReadFileBytes(longer_dir / "ckpt-10.safetensors"));
}

TEST(ParameterServerCheckpoints, OneWorkerResumesOntoTheUninterruptedRun) {
  const auto base = testing::FreshTestDirectory();  // emptied at every call: taken once
  const TrainTestData data = testing::TinyTrainTestData();
  const auto whole_dir = base / "whole_dir";
  auto whole = Train(PsConfig(whole_dir.string(), 1), data);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const auto dir = base / "dir";
  TrainStopped(dir, 7, data, 1);  // one worker, 24 batches an epoch
  auto resumed = Train(PsConfig(dir.string(), 1), data);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->resumed_from_step, 7);
  EXPECT_EQ(resumed->steps, whole->steps);
  EXPECT_EQ(resumed->weights_digest, whole->weights_digest);
  ASSERT_EQ(resumed->epochs.size(), 2u);
  EXPECT_EQ(resumed->epochs[0].steps, 24 - 7);
  for (std::size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(resumed->epochs[e].train_loss, whole->epochs[e].train_loss) << "epoch " << e + 1;
    EXPECT_EQ(resumed->epochs[e].train_accuracy, whole->epochs[e].train_accuracy) << "epoch " << e + 1;
    EXPECT_EQ(resumed->epochs[e].test_loss, whole->epochs[e].test_loss) << "epoch " << e + 1;
  }
}

TEST(ParameterServerCheckpoints, SeveralWorkersResumePushingEveryBatchOnceDeterministically) {
  const auto base = testing::FreshTestDirectory();  // emptied at every call: taken once
  const TrainTestData data = testing::TinyTrainTestData();
  const auto whole_dir = base / "whole_dir";
  auto whole = Train(PsConfig(whole_dir.string()), data);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  ASSERT_EQ(whole->steps, 48);
  const auto dir = base / "dir";
  TrainStopped(dir, 10, data);
  const auto copy = base / "copy";
  std::filesystem::copy(dir, copy,
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  auto resumed = Train(PsConfig(dir.string()), data);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->resumed_from_step, 10);
  ASSERT_TRUE(resumed->resume.has_value());
  EXPECT_EQ(resumed->resume->position.examples_consumed, 40);  // 10 batches of 4, whichever workers pushed them
  EXPECT_EQ(resumed->steps, 48);                               // the 14 batches left of epoch 1, then epoch 2
  ASSERT_EQ(resumed->epochs.size(), 2u);
  EXPECT_EQ(resumed->epochs[0].steps, 14);
  EXPECT_EQ(resumed->epochs[1].steps, 24);
  EXPECT_EQ(resumed->staleness.size(), 38u);
  auto again = Train(PsConfig(copy.string()), data);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->weights_digest, resumed->weights_digest);
  EXPECT_EQ(again->staleness, resumed->staleness);
}

TEST(ParameterServerCheckpoints, AMidEpochCheckpointResumesOnParameterServerWithItsWorkersOnly) {
  const auto base = testing::FreshTestDirectory();  // emptied at every call: taken once
  const TrainTestData data = testing::TinyTrainTestData();
  const auto dir = base / "dir";
  TrainStopped(dir, 10, data);
  TrainConfig mirrored = PsConfig(dir.string());
  mirrored.cluster.strategy = StrategyKind::kMirrored;
  mirrored.cluster.workers = 1;
  auto refused = Train(mirrored, data);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("a synchronous strategy resumes at one position in the epoch's order"),
            std::string::npos)
      << refused.status().message();
  TrainConfig two = PsConfig(dir.string(), 2);
  two.batch_per_replica = 8;  // the same global batch, on other workers
  refused = Train(two, data);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("resume with --workers 4"), std::string::npos)
      << refused.status().message();
  // Once the epoch is finished on parameter_server, any strategy takes over.
  TrainConfig finish = PsConfig(dir.string());
  finish.epochs = 1;
  ASSERT_TRUE(Train(finish, data).ok());
  auto report = Train(mirrored, data);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->resume->epoch, 2);
}

TEST(ParameterServerCheckpoints, StepsEndingAnEpochTakeNoFurtherUpdate) {
  const auto base = testing::FreshTestDirectory();  // emptied at every call: taken once
  const TrainTestData data = testing::TinyTrainTestData();
  const auto dir = base / "dir";
  TrainConfig config = PsConfig(dir.string());
  config.max_steps = 24;  // exactly epoch 1
  CheckpointPaths saved;
  auto report = Train(config, data, &saved);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->steps, 24);
  EXPECT_EQ(report->staleness.size(), 24u);
  ASSERT_EQ(report->epochs.size(), 1u);
  EXPECT_EQ(saved.paths, std::vector<std::string>{"ckpt-24.safetensors"});
}

TEST(ParameterServerCheckpoints, BacksUpAtBackupEvery) {
  const auto base = testing::FreshTestDirectory();  // emptied at every call: taken once
  const TrainTestData data = testing::TinyTrainTestData();
  const auto dir = base / "dir";
  TrainConfig config = PsConfig("");
  config.backup_dir = (dir / "backup").string();
  config.backup_every = 3;  // refused for parameter_server before
  config.max_steps = 8;
  auto report = Train(config, data);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->steps, 8);
  EXPECT_FALSE(std::filesystem::exists(dir / "backup" / "chief"));  // deleted when training ended normally
}

}  // namespace
}  // namespace dtlab
