// core/file_io.h: reading untrusted files (regular files only, bounded, never
// blocking on a FIFO), writing outputs (atomic, through symlinks, never replacing
// a device, FIFO or directory, never following a planted temporary file) and the
// one-writer lock.
#include "core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "test_util.h"

namespace dtlab {
namespace {

namespace fs = std::filesystem;

void WriteText(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

bool Contains(const Status& status, const std::string& text) {
  return status.message().find(text) != std::string::npos;
}

std::size_t CountEntries(const fs::path& dir) {
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++files;
  return files;
}

TEST(ReadRegularFileTest, ReadsARegularFileAndThroughASymlink) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  WriteText(dir / "a.txt", "hello");
  fs::create_symlink("a.txt", dir / "link");
  StatusOr<std::string> text = ReadRegularFile((dir / "a.txt").string(), 100, "test file");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "hello");
  text = ReadRegularFile((dir / "link").string(), 100, "test file");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "hello");
}

TEST(ReadRegularFileTest, MissingIsNotFoundNamingWhatAndWhere) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  const std::string path = (dir / "absent").string();
  StatusOr<std::string> text = ReadRegularFile(path, 100, "scenario file");
  EXPECT_EQ(text.status().code(), Status::Code::kNotFound);
  EXPECT_TRUE(Contains(text.status(), "scenario file " + path)) << text.status().message();
}

TEST(ReadRegularFileTest, RefusesAFifoWithoutBlocking) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  const std::string path = (dir / "fifo").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  // A blocking open would wait forever for a writer; the test would time out.
  StatusOr<std::string> text = ReadRegularFile(path, 100, "checkpoint");
  EXPECT_EQ(text.status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(text.status(), "is a FIFO, not a regular file")) << text.status().message();
}

TEST(ReadRegularFileTest, RefusesACharacterDeviceAndASymlinkToOne) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  fs::create_symlink("/dev/zero", dir / "ckpt-1.safetensors");
  for (const std::string& path : {std::string("/dev/zero"), (dir / "ckpt-1.safetensors").string()}) {
    StatusOr<std::string> text = ReadRegularFile(path, kMaxCheckpointBytes, "checkpoint");
    EXPECT_EQ(text.status().code(), Status::Code::kInvalidArgument) << path;
    EXPECT_TRUE(Contains(text.status(), "is a character device, not a regular file")) << text.status().message();
  }
}

TEST(ReadRegularFileTest, RefusesADirectory) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  StatusOr<std::string> text = ReadRegularFile(dir.string(), 100, "lesson file");
  EXPECT_EQ(text.status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(text.status(), "is a directory")) << text.status().message();
}

TEST(ReadRegularFileTest, RefusesAFileOverTheLimitNamingIt) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  WriteText(dir / "big", std::string(101, 'x'));
  WriteText(dir / "exact", std::string(100, 'x'));
  StatusOr<std::string> text = ReadRegularFile((dir / "big").string(), 100, "replay record");
  EXPECT_EQ(text.status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(text.status(), "101 bytes, more than the limit of 100 bytes")) << text.status().message();
  text = ReadRegularFile((dir / "exact").string(), 100, "replay record");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(text->size(), 100u);
}

TEST(ReadRegularFileTest, SymlinkLoopIsAnErrorNotAnException) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  fs::create_symlink("b", dir / "a");
  fs::create_symlink("a", dir / "b");
  StatusOr<std::string> text = ReadRegularFile((dir / "a").string(), 100, "checkpoint pointer file");
  EXPECT_EQ(text.status().code(), Status::Code::kIOError);
  EXPECT_TRUE(Contains(text.status(), "symlink loop")) << text.status().message();
}

TEST(ResolveOutputPathTest, RegularNewAndSymlinkedTargets) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  WriteText(dir / "real.csv", "old");
  fs::create_symlink("real.csv", dir / "out.csv");
  fs::create_symlink("out.csv", dir / "chain.csv");
  fs::create_symlink("nowhere.csv", dir / "dangling.csv");
  EXPECT_EQ(*ResolveOutputPath((dir / "real.csv").string(), "--csv"), (dir / "real.csv").string());
  EXPECT_EQ(*ResolveOutputPath((dir / "new.csv").string(), "--csv"), (dir / "new.csv").string());
  EXPECT_EQ(*ResolveOutputPath((dir / "out.csv").string(), "--csv"), (dir / "real.csv").string());
  EXPECT_EQ(*ResolveOutputPath((dir / "chain.csv").string(), "--csv"), (dir / "real.csv").string());
  EXPECT_EQ(*ResolveOutputPath((dir / "dangling.csv").string(), "--csv"), (dir / "nowhere.csv").string());
}

TEST(ResolveOutputPathTest, RefusesDevicesFifosDirectoriesAndLoops) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  fs::create_symlink("/dev/null", dir / "to-null");
  fs::create_symlink("loop2", dir / "loop1");
  fs::create_symlink("loop1", dir / "loop2");
  const struct {
    std::string path, phrase;
  } cases[] = {{"/dev/null", "is a character device"},
               {(dir / "to-null").string(), "is a character device"},
               {(dir / "fifo").string(), "is a FIFO"},
               {dir.string(), "is a directory"},
               {(dir / "loop1").string(), "symlink loop"}};
  for (const auto& c : cases) {
    StatusOr<std::string> target = ResolveOutputPath(c.path, "--report");
    EXPECT_EQ(target.status().code(), Status::Code::kInvalidArgument) << c.path;
    EXPECT_TRUE(Contains(target.status(), c.phrase)) << target.status().message();
    EXPECT_TRUE(Contains(target.status(), "--report " + c.path)) << target.status().message();
  }
}

TEST(WriteFileAtomicallyTest, NeverReplacesACharacterDevice) {
  struct stat before;
  ASSERT_EQ(::stat("/dev/null", &before), 0);
  const Status status = WriteFileAtomically("/dev/null", "abc");
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
  struct stat after;
  ASSERT_EQ(::stat("/dev/null", &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode));
  EXPECT_EQ(before.st_ino, after.st_ino);
}

TEST(WriteFileAtomicallyTest, WritesThroughASymlinkWhichSurvives) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  fs::create_directories(dir / "elsewhere");
  WriteText(dir / "elsewhere" / "real.csv", "old");
  fs::create_symlink("elsewhere/real.csv", dir / "out.csv");
  ASSERT_TRUE(WriteFileAtomically((dir / "out.csv").string(), "new").ok());
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir / "out.csv")));
  EXPECT_EQ(::dtlab::testing::ReadFileBytes(dir / "elsewhere" / "real.csv"), "new");
  EXPECT_EQ(CountEntries(dir / "elsewhere"), 1u) << "no temporary file left beside the target";
  // A dangling symlink: its target is created, the link kept.
  fs::create_symlink("made.csv", dir / "dangling.csv");
  ASSERT_TRUE(WriteFileAtomically((dir / "dangling.csv").string(), "made").ok());
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir / "dangling.csv")));
  EXPECT_EQ(::dtlab::testing::ReadFileBytes(dir / "made.csv"), "made");
}

TEST(WriteFileAtomicallyTest, NeverFollowsASymlinkPlantedAtTheTemporaryName) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  WriteText(dir / "victim", "precious");
  // Plant symlinks (and a stale file) at the first temporary names this process
  // could use: a writer that followed one would overwrite the victim.
  for (int n = 0; n < 200; ++n) {
    const std::string name = "out.json.tmp-" + std::to_string(::getpid()) + "." + std::to_string(n);
    if (n % 2 == 0)
      fs::create_symlink(dir / "victim", dir / name);
    else
      WriteText(dir / name, "stale");
  }
  const Status status = WriteFileAtomically((dir / "out.json").string(), "data");
  // Either written under a fresh name or refused; the victim is never touched.
  EXPECT_EQ(::dtlab::testing::ReadFileBytes(dir / "victim"), "precious");
  if (status.ok()) {
    EXPECT_EQ(::dtlab::testing::ReadFileBytes(dir / "out.json"), "data");
  }
}

TEST(AppendToRegularFileTest, AppendsCreatesAndRefusesOthers) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  const std::string path = (dir / "metrics.csv").string();
  bool was_empty = false;
  ASSERT_TRUE(AppendToRegularFile(path, "a\n", "metrics file", &was_empty).ok());
  EXPECT_TRUE(was_empty);
  ASSERT_TRUE(AppendToRegularFile(path, "b\n", "metrics file", &was_empty).ok());
  EXPECT_FALSE(was_empty);
  EXPECT_EQ(::dtlab::testing::ReadFileBytes(path), "a\nb\n");
  EXPECT_TRUE(CheckAppendPath(path, "metrics file").ok());

  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(AppendToRegularFile((dir / "fifo").string(), "x", "metrics file").code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(CheckAppendPath((dir / "fifo").string(), "metrics file").code(), Status::Code::kInvalidArgument);
  fs::create_symlink("loop", dir / "loop");
  const Status loop = CheckAppendPath((dir / "loop").string(), "metrics file");
  EXPECT_EQ(loop.code(), Status::Code::kIOError);
  EXPECT_TRUE(Contains(loop, "symlink loop")) << loop.message();
  EXPECT_EQ(AppendToRegularFile((dir / "loop").string(), "x", "metrics file").code(), Status::Code::kIOError);
  EXPECT_TRUE(CheckAppendPath((dir / "absent.csv").string(), "metrics file").ok());
}

TEST(ExclusiveFileLockTest, SecondHolderIsRefusedNamingTheFirst) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  const std::string lock_path = (dir / ".dtlab.lock").string();
  StatusOr<ExclusiveFileLock> first = ExclusiveFileLock::Acquire(lock_path, "checkpoint directory D");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  // flock locks belong to open file descriptions: a second open in this same
  // process conflicts as another process's would.
  StatusOr<ExclusiveFileLock> second = ExclusiveFileLock::Acquire(lock_path, "checkpoint directory D");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(second.status(), "checkpoint directory D is in use by pid " + std::to_string(::getpid())))
      << second.status().message();
  // Released with the object: the next one gets it.
  { ExclusiveFileLock released = std::move(first).value(); }
  EXPECT_TRUE(ExclusiveFileLock::Acquire(lock_path, "checkpoint directory D").ok());
}

TEST(ExclusiveFileLockTest, RefusesASymlinkedLockFile) {
  const fs::path dir = ::dtlab::testing::FreshTestDirectory();
  WriteText(dir / "victim", "precious");
  fs::create_symlink(dir / "victim", dir / ".dtlab.lock");
  StatusOr<ExclusiveFileLock> lock = ExclusiveFileLock::Acquire((dir / ".dtlab.lock").string(), "checkpoint directory");
  EXPECT_EQ(lock.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(::dtlab::testing::ReadFileBytes(dir / "victim"), "precious");
}

}  // namespace
}  // namespace dtlab
