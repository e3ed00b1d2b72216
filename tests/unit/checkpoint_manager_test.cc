#include "core/checkpoint_manager.h"

#include <gtest/gtest.h>

#include "tests/unit/test_util.h"
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace dtlab {
namespace {

namespace fs = std::filesystem;

void WriteRaw(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A small checkpoint whose contents identify `number`.
SafetensorsFile MakeCheckpoint(std::int64_t number) {
  SafetensorsFile file;
  Tensor<float> weights({2, 2}, {1.0f, 2.0f, 3.0f, static_cast<float>(number)});
  EXPECT_TRUE(file.Add("dense/kernel", weights).ok());
  const std::vector<std::int64_t> step = {number * 100};
  EXPECT_TRUE(file.Add("step", std::span<const std::int64_t>(step), {}).ok());
  return file;
}

std::int64_t StepOf(const SafetensorsFile& file) { return file.GetI64("step").value().at(0); }

std::string Name(int number) { return "ckpt-" + std::to_string(number) + ".safetensors"; }

TEST(CheckpointManagerTest, KeepsTheMostRecent) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory() / "run";
  CheckpointManager manager(dir.string(), 3);
  for (int number = 1; number <= 7; ++number) {
    std::string saved;
    ASSERT_TRUE(manager.Save(MakeCheckpoint(number), number, &saved).ok());
    EXPECT_EQ(saved, (dir / Name(number)).string());
  }
  for (int number = 1; number <= 7; ++number) {
    EXPECT_EQ(fs::exists(dir / Name(number)), number >= 5) << number;
  }
  EXPECT_EQ(::dtlab::testing::ReadFileBytes(dir / "checkpoint"),
            "model_checkpoint_path: \"ckpt-7.safetensors\"\n"
            "all_model_checkpoint_paths: \"ckpt-5.safetensors\"\n"
            "all_model_checkpoint_paths: \"ckpt-6.safetensors\"\n"
            "all_model_checkpoint_paths: \"ckpt-7.safetensors\"\n");
  StatusOr<std::optional<std::string>> latest = manager.LatestPath();
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ(**latest, (dir / Name(7)).string());
  StatusOr<std::vector<std::string>> list = manager.List();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list,
            (std::vector<std::string>{(dir / Name(5)).string(), (dir / Name(6)).string(), (dir / Name(7)).string()}));
  EXPECT_EQ(manager.directory(), dir.string());
}

TEST(CheckpointManagerTest, NothingSavedYet) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  CheckpointManager manager(dir.string(), 3);
  StatusOr<std::optional<std::string>> latest = manager.LatestPath();
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_FALSE(latest->has_value());
  EXPECT_TRUE(manager.List().value().empty());
  StatusOr<SafetensorsFile> restored = manager.RestoreLatest();
  EXPECT_EQ(restored.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(restored.status().message(), "no checkpoint in " + dir.string());

  CheckpointManager absent((dir / "never-created").string(), 3);
  EXPECT_FALSE(absent.LatestPath().value().has_value());
  EXPECT_EQ(absent.RestoreLatest().status().code(), Status::Code::kNotFound);
}

TEST(CheckpointManagerTest, RestoreLatestGivesTheSavedData) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  CheckpointManager manager(dir.string(), 2);
  ASSERT_TRUE(manager.Save(MakeCheckpoint(1), 1).ok());
  ASSERT_TRUE(manager.Save(MakeCheckpoint(2), 2).ok());
  StatusOr<SafetensorsFile> restored = manager.RestoreLatest();
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->entries(), MakeCheckpoint(2).entries());
  EXPECT_EQ(StepOf(*restored), 200);

  // A second manager on the same directory sees the same state.
  CheckpointManager reopened(dir.string(), 2);
  EXPECT_EQ(StepOf(reopened.RestoreLatest().value()), 200);
}

TEST(CheckpointManagerTest, CorruptedLatestIsCorruption) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  CheckpointManager manager(dir.string(), 3);
  ASSERT_TRUE(manager.Save(MakeCheckpoint(1), 1).ok());
  const fs::path path = dir / Name(1);
  std::string bytes = ::dtlab::testing::ReadFileBytes(path);
  bytes[bytes.size() - 3] ^= 0x40;
  WriteRaw(path, bytes);
  StatusOr<SafetensorsFile> restored = manager.RestoreLatest();
  EXPECT_EQ(restored.status().code(), Status::Code::kCorruption);
  EXPECT_EQ(restored.status().message().rfind(path.string(), 0), 0u) << restored.status().message();
  EXPECT_NE(restored.status().message().find("checksum mismatch"), std::string::npos);
}

TEST(CheckpointManagerTest, BadPointerFileIsCorruption) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  CheckpointManager manager(dir.string(), 3);
  ASSERT_TRUE(manager.Save(MakeCheckpoint(1), 1).ok());
  for (const std::string& text : {std::string("garbage\n"), std::string("model_checkpoint_path: ckpt-1.safetensors\n"),
                                  std::string("model_checkpoint_path: \"../etc/passwd\"\n"),
                                  std::string("all_model_checkpoint_paths: \"ckpt-1.safetensors\"\n"),
                                  std::string("\n"), std::string("model_checkpoint_path: \"ckpt-9.safetensors\"\n")}) {
    SCOPED_TRACE(text);
    WriteRaw(dir / "checkpoint", text);
    EXPECT_EQ(manager.RestoreLatest().status().code(), Status::Code::kCorruption);
    EXPECT_EQ(manager.LatestPath().status().code(), Status::Code::kCorruption);
  }
  // A damaged pointer does not block the next save.
  ASSERT_TRUE(manager.Save(MakeCheckpoint(2), 2).ok());
  EXPECT_EQ(StepOf(manager.RestoreLatest().value()), 200);
}

TEST(CheckpointManagerTest, StaleTemporaryFilesAreIgnoredThenRemoved) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  CheckpointManager manager(dir.string(), 3);
  ASSERT_TRUE(manager.Save(MakeCheckpoint(1), 1).ok());
  // What a save that crashed mid-write leaves behind.
  WriteRaw(dir / (Name(2) + ".tmp-99999"), "half a checkpoi");
  WriteRaw(dir / "checkpoint.tmp-99999", "model_checkpoint_path: \"ckpt-2.saf");
  EXPECT_EQ(**manager.LatestPath(), (dir / Name(1)).string());
  EXPECT_EQ(StepOf(manager.RestoreLatest().value()), 100);
  EXPECT_EQ(manager.List().value().size(), 1u);

  ASSERT_TRUE(manager.Save(MakeCheckpoint(2), 2).ok());
  EXPECT_FALSE(fs::exists(dir / (Name(2) + ".tmp-99999")));
  EXPECT_FALSE(fs::exists(dir / "checkpoint.tmp-99999"));
  EXPECT_EQ(StepOf(manager.RestoreLatest().value()), 200);
}

TEST(CheckpointManagerTest, CrashBeforePointerUpdateKeepsThePreviousLatest) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  CheckpointManager manager(dir.string(), 2);
  ASSERT_TRUE(manager.Save(MakeCheckpoint(1), 1).ok());
  ASSERT_TRUE(manager.Save(MakeCheckpoint(2), 2).ok());
  // Checkpoint 3 written, then a crash before the pointer was rewritten.
  ASSERT_TRUE(WriteFileAtomically((dir / Name(3)).string(), SerializeSafetensors(MakeCheckpoint(3))).ok());
  EXPECT_EQ(StepOf(manager.RestoreLatest().value()), 200);
  // The next save counts the orphan as oldest and trims it with the rest.
  ASSERT_TRUE(manager.Save(MakeCheckpoint(4), 4).ok());
  EXPECT_FALSE(fs::exists(dir / Name(1)));
  EXPECT_FALSE(fs::exists(dir / Name(3)));
  EXPECT_TRUE(fs::exists(dir / Name(2)));
  EXPECT_TRUE(fs::exists(dir / Name(4)));
}

TEST(CheckpointManagerTest, MaxToKeepZeroKeepsAll) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  CheckpointManager manager(dir.string(), 0);
  for (int number = 1; number <= 12; ++number) {
    ASSERT_TRUE(manager.Save(MakeCheckpoint(number), number).ok());
  }
  for (int number = 1; number <= 12; ++number) EXPECT_TRUE(fs::exists(dir / Name(number)));
  EXPECT_EQ(manager.List().value().size(), 12u);
  EXPECT_EQ(StepOf(manager.RestoreLatest().value()), 1200);
}

TEST(CheckpointManagerTest, SavingTheSameNumberReplacesIt) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  CheckpointManager manager(dir.string(), 3);
  ASSERT_TRUE(manager.Save(MakeCheckpoint(1), 1).ok());
  ASSERT_TRUE(manager.Save(MakeCheckpoint(2), 2).ok());
  SafetensorsFile replacement = MakeCheckpoint(1);
  replacement.metadata["replaced"] = "yes";
  ASSERT_TRUE(manager.Save(replacement, 1).ok());
  StatusOr<SafetensorsFile> restored = manager.RestoreLatest();
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(restored->metadata.at("replaced"), "yes");
  EXPECT_EQ(manager.List().value(), (std::vector<std::string>{(dir / Name(2)).string(), (dir / Name(1)).string()}));
}

TEST(CheckpointManagerTest, LargestNumberRoundTrips) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  CheckpointManager manager(dir.string(), 1);
  const std::int64_t largest = std::numeric_limits<std::int64_t>::max();
  ASSERT_TRUE(manager.Save(MakeCheckpoint(3), largest).ok());
  EXPECT_EQ(**manager.LatestPath(), (dir / ("ckpt-" + std::to_string(largest) + ".safetensors")).string());
}

TEST(CheckpointManagerTest, RejectsBadArguments) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  EXPECT_EQ(CheckpointManager(dir.string(), 3).Save(MakeCheckpoint(1), -1).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(CheckpointManager(dir.string(), -2).Save(MakeCheckpoint(1), 1).code(), Status::Code::kInvalidArgument);
  // A directory that cannot be created.
  WriteRaw(dir / "file", "x");
  EXPECT_EQ(CheckpointManager((dir / "file" / "sub").string(), 3).Save(MakeCheckpoint(1), 1).code(),
            Status::Code::kIOError);
}

}  // namespace
}  // namespace dtlab
