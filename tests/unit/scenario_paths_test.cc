// Run names are names, never paths (scenarios/scenario.h CheckRunName): a scenario
// cannot make dtlab run write outside the run's own directory.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "scenarios/scenario.h"
#include "scenarios/scenario_runner.h"

namespace dtlab {
namespace {

constexpr const char* kBase = R"(title = "t"
[cluster]
strategy = "mirrored"
replicas = 2
[data]
source = "synthetic"
global_batch = 4
[run]
steps = 1
[[check]]
kind = "reference"
expect = "pass"
)";

std::string WithVariant(const std::string& name) {
  return std::string(kBase) + "[[variant]]\nname = \"" + name + "\"\nresume_from = \"main\"\n";
}

TEST(RunNameTest, AllowsPlainNames) {
  for (const std::string& name :
       std::vector<std::string>{"main", "v1", "lr-0.01", "A_b.c", std::string(kMaxRunNameLength, 'x')})
    EXPECT_TRUE(CheckRunName(name).ok()) << name;
}

TEST(RunNameTest, RefusesPathsAndOddNames) {
  const std::vector<std::string> names = {"",
                                          ".",
                                          "..",
                                          "../x",
                                          "../../../elsewhere/escape",
                                          "/srv/abs",
                                          "a/b",
                                          "a b",
                                          "a\nb",
                                          "a\\b",
                                          std::string(kMaxRunNameLength + 1, 'x'),
                                          "caf\xc3\xa9"};
  for (const std::string& name : names) {
    const Status status = CheckRunName(name);
    EXPECT_EQ(status.code(), Status::Code::kInvalidArgument) << name;
    EXPECT_NE(status.message().find("a run name becomes a directory name"), std::string::npos) << status.message();
  }
}

TEST(RunNameTest, ParserRefusesAVariantNamedLikeAPathNamingFileAndVariant) {
  for (const std::string name : {"../x", "/srv/abs", "..", "a/b"}) {
    StatusOr<Scenario> scenario = ParseScenario(WithVariant(name), "s.toml");
    ASSERT_FALSE(scenario.ok()) << name;
    EXPECT_EQ(scenario.status().code(), Status::Code::kInvalidArgument);
    const std::string& message = scenario.status().message();
    EXPECT_EQ(message.rfind("s.toml:", 0), 0u) << message;
    EXPECT_NE(message.find("[[variant]] name"), std::string::npos) << message;
    EXPECT_NE(message.find("'" + name + "'"), std::string::npos) << message;
  }
}

TEST(RunNameTest, CheckpointDirectoriesStayUnderTheWorkDirectory) {
  StatusOr<Scenario> scenario = ParseScenario(WithVariant("resumed"), "s.toml");
  ASSERT_TRUE(scenario.ok()) << scenario.status().ToString();
  auto directories = CheckpointDirectories(*scenario, "/work");
  ASSERT_TRUE(directories.ok()) << directories.status().ToString();
  EXPECT_EQ(directories->size(), 2u);
  EXPECT_EQ(directories->at("main"), "/work/main");
  EXPECT_EQ(directories->at("resumed"), "/work/resumed");
  // A Scenario built in code, past the parser, is refused all the same.
  scenario->runs.back().name = "../escape";
  EXPECT_EQ(CheckpointDirectories(*scenario, "/work").status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(RunDirectory("/tb", "/abs").status().code(), Status::Code::kInvalidArgument);
}

// Issue 19: the text a scenario shows is escaped when it is read; a value it uses
// (a data directory) is kept as written, or a path with such a character could
// never be opened.
TEST(ScenarioText, DisplayTextIsEscapedAndValuesAreKept) {
  std::string text = kBase;
  text.replace(text.find("title = \"t\""), 11, "title = \"t\\u001b[2J\\u202e\"");
  text.replace(text.find("source = \"synthetic\""), 20, "source = \"data\\u202edir\"");
  StatusOr<Scenario> scenario = ParseScenario(text, "s.toml");
  ASSERT_TRUE(scenario.ok()) << scenario.status().ToString();
  EXPECT_EQ(scenario->title, "t\\x1b[2J\\u202e");
  ASSERT_FALSE(scenario->runs.empty());
  EXPECT_EQ(scenario->runs[0].data.source,
            "data\xe2\x80\xae"
            "dir");
}

}  // namespace
}  // namespace dtlab
