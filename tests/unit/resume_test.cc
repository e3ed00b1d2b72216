// Resuming a checkpoint under another configuration (sim/training/trainer.h): the position
// in the epoch when the global batch changes, what carries over, and what is
// refused (another model, another optimizer's slots, parameter_server mid-epoch).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "core/checkpoint_manager.h"
#include "sim/training/trainer.h"
#include "test_util.h"

namespace dtlab {
namespace {

TEST(MapEpochPosition, SameGlobalBatchKeepsTheBatch) {
  const EpochPosition p = MapEpochPosition(30, 128, 128, 60000);
  EXPECT_EQ(p.step_in_epoch, 30);
  EXPECT_EQ(p.examples_consumed, 3840);
  EXPECT_EQ(p.examples_skipped, 0);
}

TEST(MapEpochPosition, DividingBatchesMapExactly) {
  // 30 batches of 128 are 3840 examples: 20 of 192, 60 of 64.
  EXPECT_EQ(MapEpochPosition(30, 128, 192, 60000).step_in_epoch, 20);
  EXPECT_EQ(MapEpochPosition(30, 128, 64, 60000).step_in_epoch, 60);
  EXPECT_EQ(MapEpochPosition(30, 128, 192, 60000).examples_skipped, 0);
}

TEST(MapEpochPosition, RoundsUpSoThatNoExampleRepeats) {
  // 3840 examples taken; batches of 144 end at 3744 (26) and 3888 (27): the run
  // goes on at 27, leaving out 48 examples rather than taking 96 twice.
  const EpochPosition p = MapEpochPosition(30, 128, 144, 60000);
  EXPECT_EQ(p.step_in_epoch, 27);
  EXPECT_EQ(p.examples_consumed, 3840);
  EXPECT_EQ(p.examples_skipped, 48);
  EXPECT_GE(p.step_in_epoch * 144, p.examples_consumed);
  EXPECT_LT(p.examples_skipped, 144);
}

TEST(MapEpochPosition, AShortLastBatchEndsTheEpoch) {
  // 100 examples in batches of 32: 4 batches, the last of 4; all 100 were taken.
  const EpochPosition p = MapEpochPosition(4, 32, 48, 100);
  EXPECT_EQ(p.examples_consumed, 100);
  EXPECT_EQ(p.step_in_epoch, 3);  // ceil(100 / 48): the new epoch's 3 batches are done
  EXPECT_EQ(p.examples_skipped, 0);
  // Near the end, rounding up leaves out only what the epoch still had.
  const EpochPosition q = MapEpochPosition(3, 32, 48, 100);
  EXPECT_EQ(q.examples_consumed, 96);
  EXPECT_EQ(q.step_in_epoch, 2);
  EXPECT_EQ(q.examples_skipped, 0);
  const EpochPosition r = MapEpochPosition(3, 30, 48, 100);
  EXPECT_EQ(r.examples_consumed, 90);
  EXPECT_EQ(r.step_in_epoch, 2);
  EXPECT_EQ(r.examples_skipped, 6);  // 90..95; 96..99 are the new run's last batch
}

TEST(MapEpochPosition, HostileCountsDoNotOverflow) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const EpochPosition p = MapEpochPosition(kMax, kMax, 7, 60000);
  EXPECT_EQ(p.examples_consumed, 60000);
  EXPECT_EQ(p.step_in_epoch, 8572);  // ceil(60000 / 7): the epoch is over
  const EpochPosition q = MapEpochPosition(kMax / 2, 3, kMax, 60000);
  EXPECT_EQ(q.examples_consumed, 60000);
  EXPECT_EQ(q.step_in_epoch, 1);
  EXPECT_EQ(q.examples_skipped, 0);
  EXPECT_EQ(MapEpochPosition(0, 5, 9, 0).step_in_epoch, 0);
}

// A small random data set: 96 training and 32 test images of 4x4, 3 classes.
TrainTestData TinyData() { return testing::TinyTrainTestData(); }

TrainConfig TinyConfig(const std::string& directory) {
  TrainConfig config;
  config.model = "linear";
  config.epochs = 2;
  config.batch_per_replica = 8;
  config.checkpoint_dir = directory;
  config.checkpoint_every = 5;
  config.max_to_keep = 0;
  return config;
}

TEST(Resume, AnotherReplicaCountCarriesEverythingOver) {
  const TrainTestData data = TinyData();
  const auto dir = testing::FreshTestDirectory();
  TrainConfig first = TinyConfig(dir.string());
  first.cluster.strategy = StrategyKind::kMirrored;
  first.cluster.replicas = 4;
  first.batch_per_replica = 4;  // global batch 16
  first.max_steps = 5;
  ASSERT_TRUE(Train(first, data).ok());

  TrainConfig second = TinyConfig(dir.string());
  second.cluster.strategy = StrategyKind::kMirrored;
  second.cluster.replicas = 2;
  second.batch_per_replica = 8;  // the same global batch
  second.max_steps = 8;
  auto report = Train(second, data);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_TRUE(report->resume.has_value());
  const ResumeReport& r = *report->resume;
  EXPECT_EQ(r.step, 5);
  EXPECT_EQ(r.epoch, 1);
  EXPECT_EQ(r.model_variables, 2);
  EXPECT_EQ(r.optimizer_slot_variables, 4);  // adam m and v of the kernel and the bias
  EXPECT_EQ(r.optimizer_iterations, 5);
  EXPECT_EQ(r.position.step_in_epoch, 5);
  EXPECT_EQ(r.position.examples_consumed, 80);
  EXPECT_TRUE(r.layout_recorded);
  EXPECT_FALSE(r.data_order_changed);
  ASSERT_EQ(r.changes.size(), 1u);  // batch_per_replica 4 -> 8 follows from it
  EXPECT_EQ(r.changes[0].setting, "replicas");
  EXPECT_EQ(r.changes[0].checkpoint, "4");
  EXPECT_EQ(r.changes[0].run, "2");
  EXPECT_EQ(report->steps, 8);
  // Epoch 1 has 6 batches of 16: the resumed run takes the last one, then 2 of epoch 2.
  ASSERT_EQ(report->epochs.size(), 2u);
  EXPECT_EQ(report->epochs[0].steps, 1);
  EXPECT_EQ(report->epochs[1].steps, 2);
}

TEST(Resume, AnotherGlobalBatchMovesThePositionInTheEpoch) {
  const TrainTestData data = TinyData();
  const auto dir = testing::FreshTestDirectory();
  TrainConfig first = TinyConfig(dir.string());
  first.max_steps = 5;  // 5 batches of 8: 40 of the epoch's 96 examples
  ASSERT_TRUE(Train(first, data).ok());
  TrainConfig second = TinyConfig(dir.string());
  second.batch_per_replica = 12;
  second.epochs = 1;
  auto report = Train(second, data);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const ResumeReport& r = *report->resume;
  EXPECT_EQ(r.checkpoint_global_batch, 8);
  EXPECT_EQ(r.global_batch, 12);
  EXPECT_EQ(r.position.examples_consumed, 40);
  EXPECT_EQ(r.position.step_in_epoch, 4);  // ceil(40 / 12): 48 onwards
  EXPECT_EQ(r.position.examples_skipped, 8);
  // The epoch's 8 batches of 12, of which 4 were left.
  EXPECT_EQ(report->steps, 5 + 4);
  ASSERT_EQ(report->epochs.size(), 1u);
  EXPECT_EQ(report->epochs[0].steps, 4);
}

TEST(Resume, AnotherSeedIsTakenAndSaysTheDataOrderChanged) {
  const TrainTestData data = TinyData();
  const auto dir = testing::FreshTestDirectory();
  TrainConfig first = TinyConfig(dir.string());
  first.max_steps = 5;
  ASSERT_TRUE(Train(first, data).ok());
  TrainConfig second = TinyConfig(dir.string());
  second.seed = 2;
  second.max_steps = 6;
  auto report = Train(second, data);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->resume->data_order_changed);
  ASSERT_EQ(report->resume->changes.size(), 1u);
  EXPECT_EQ(report->resume->changes[0].setting, "seed");
}

TEST(Resume, AnotherModelOrOptimizerIsRefused) {
  const TrainTestData data = TinyData();
  const auto dir = testing::FreshTestDirectory();
  TrainConfig first = TinyConfig(dir.string());
  first.max_steps = 5;
  ASSERT_TRUE(Train(first, data).ok());

  TrainConfig cnn = TinyConfig(dir.string());
  cnn.model = "mnist-cnn";
  auto refused = Train(cnn, data);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("another model (linear there, mnist-cnn here)"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("--model linear"), std::string::npos);

  TrainConfig sgd = TinyConfig(dir.string());
  sgd.optimizer = "sgd";
  refused = Train(sgd, data);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("another optimizer (adam with slots m, v there, sgd with slots none here)"),
            std::string::npos)
      << refused.status().message();

  // The same model on images of another size has other shapes.
  TrainTestData larger = TinyData();
  for (ImageDataset* set : {&larger.train, &larger.test}) {
    set->width = 8;
    set->images.resize(static_cast<std::size_t>(set->count * 32), 0.5f);
  }
  refused = Train(TinyConfig(dir.string()), larger);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("has shape [16, 3] but linear on this data set expects [32, 3]"),
            std::string::npos)
      << refused.status().message();
}

TEST(Resume, SgdMomentumSlotsMustMatch) {
  const TrainTestData data = TinyData();
  const auto dir = testing::FreshTestDirectory();
  TrainConfig first = TinyConfig(dir.string());
  first.optimizer = "sgd";
  first.momentum = 0.9f;
  first.max_steps = 5;
  ASSERT_TRUE(Train(first, data).ok());
  TrainConfig plain = TinyConfig(dir.string());
  plain.optimizer = "sgd";
  auto refused = Train(plain, data);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("a --momentum above 0"), std::string::npos) << refused.status().message();
}

TEST(Resume, ParameterServerStartsAtEpochBoundariesOnly) {
  const TrainTestData data = TinyData();
  const auto dir = testing::FreshTestDirectory();
  TrainConfig first = TinyConfig(dir.string());
  first.max_steps = 5;  // in the middle of epoch 1
  ASSERT_TRUE(Train(first, data).ok());
  TrainConfig ps = TinyConfig(dir.string());
  ps.checkpoint_every = 0;
  ps.cluster.strategy = StrategyKind::kParameterServer;
  ps.cluster.workers = ps.cluster.replicas = 2;
  auto refused = Train(ps, data);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("parameter_server resumes at the start of an epoch only"),
            std::string::npos)
      << refused.status().message();

  // At an epoch boundary it resumes, with the synchronous run's slots.
  TrainConfig finish = TinyConfig(dir.string());
  finish.epochs = 1;
  ASSERT_TRUE(Train(finish, data).ok());
  ps.epochs = 2;
  auto report = Train(ps, data);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->resume->step, 12);
  EXPECT_EQ(report->resume->epoch, 2);
  EXPECT_EQ(report->steps, 24);
}

// Rewrites the latest checkpoint in `directory` with `edit` applied (the manager
// recomputes the checksums, so only the edit is hostile).
template <typename Edit>
void EditLatestCheckpoint(const std::string& directory, Edit edit) {
  CheckpointManager manager(directory, 0);
  auto checkpoint = manager.RestoreLatest();
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().ToString();
  edit(*checkpoint);
  ASSERT_TRUE(manager.Save(*checkpoint, 1000).ok());
}

TEST(Resume, HostileMetadataAndCountersGiveErrorsNotCrashes) {
  const TrainTestData data = TinyData();
  const auto dir = testing::FreshTestDirectory();
  TrainConfig first = TinyConfig(dir.string());
  first.max_steps = 5;
  ASSERT_TRUE(Train(first, data).ok());
  for (const std::string bad : {"0", "-8", "8x", "", "99999999999999999999", "2147483648"}) {
    EditLatestCheckpoint(dir.string(), [&](SafetensorsFile& f) { f.metadata["dtlab.global_batch"] = bad; });
    auto refused = Train(TinyConfig(dir.string()), data);
    ASSERT_FALSE(refused.ok()) << "dtlab.global_batch '" << bad << "'";
    EXPECT_EQ(refused.status().code(), Status::Code::kCorruption);
    EXPECT_NE(refused.status().message().find("dtlab.global_batch"), std::string::npos) << refused.status().message();
  }
  // A model name with control characters is printed tamed.
  EditLatestCheckpoint(dir.string(), [](SafetensorsFile& f) {
    f.metadata["dtlab.global_batch"] = "8";
    f.metadata["dtlab.model"] = "lin\x1b[2Jear";
  });
  auto refused = Train(TinyConfig(dir.string()), data);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("another model (lin\\x1b[2Jear there, linear here)"), std::string::npos)
      << refused.status().message();
  EditLatestCheckpoint(dir.string(), [](SafetensorsFile& f) { f.metadata["dtlab.model"] = "linear"; });
  // A position no run can reach is refused as damage, not mapped (issue 19: a
  // checkpoint's counters are held to what a run writes; MapEpochPosition's own
  // overflow safety is MapEpochPosition.HostileCountsDoNotOverflow).
  auto set_step_in_epoch = [&](std::int64_t value) {
    EditLatestCheckpoint(dir.string(), [&](SafetensorsFile& f) {
      TensorEntry entry = *f.Find("progress/step_in_epoch");
      std::memcpy(entry.bytes.data(), &value, sizeof value);
      SafetensorsFile edited;
      edited.metadata = f.metadata;
      for (const TensorEntry& e : f.entries()) ASSERT_TRUE(edited.AddEntry(e.name == entry.name ? entry : e).ok());
      f = edited;
    });
  };
  std::int64_t step_in_epoch = 0;
  {
    auto latest = CheckpointManager(dir.string(), 0).RestoreLatest();
    ASSERT_TRUE(latest.ok());
    auto values = latest->GetI64("progress/step_in_epoch");
    ASSERT_TRUE(values.ok());
    step_in_epoch = (*values)[0];
  }
  for (const std::int64_t huge : {std::numeric_limits<std::int64_t>::max(), std::int64_t{1} << 40}) {
    set_step_in_epoch(huge);
    auto past_the_epoch = Train(TinyConfig(dir.string()), data);
    ASSERT_FALSE(past_the_epoch.ok());
    EXPECT_EQ(past_the_epoch.status().code(), Status::Code::kCorruption);
    EXPECT_NE(past_the_epoch.status().message().find("progress/step_in_epoch is " + std::to_string(huge)),
              std::string::npos)
        << past_the_epoch.status().message();
  }
  set_step_in_epoch(step_in_epoch);
  // An old checkpoint without dtlab.global_batch: batch_per_replica x replicas.
  EditLatestCheckpoint(dir.string(), [](SafetensorsFile& f) {
    f.metadata.erase("dtlab.global_batch");
    f.metadata["dtlab.batch_per_replica"] = "4";
    f.metadata.erase("dtlab.replicas");
  });
  auto report = Train(TinyConfig(dir.string()), data);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->resume->checkpoint_global_batch, 4);
}

}  // namespace
}  // namespace dtlab
