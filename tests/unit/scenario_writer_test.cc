// dtlab train --save-scenario (scenarios/scenario_writer.h): every option a flag and
// a scenario key share, set on the command line, reads back from the written file
// into the same value; the defaults that differ are written; process-only options
// are named in a comment; any other option without a key is refused.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/run_flags.h"
#include "scenarios/run_options.h"
#include "scenarios/scenario.h"
#include "scenarios/scenario_writer.h"

namespace dtlab {
namespace {

// The settings dtlab train builds from these flags, or the first error.
StatusOr<RunSettings> FromFlags(const std::vector<std::string>& args) {
  DTLAB_ASSIGN_OR_RETURN(RunSettings settings, cli::RunSettingsFromArguments(args));
  DTLAB_RETURN_IF_ERROR(settings.config.Validate());
  return settings;
}

// The main run of the file written for `settings`, read back as `dtlab run` reads it.
StatusOr<RunSettings> ThroughTheFile(const RunSettings& settings, std::string* text = nullptr) {
  DTLAB_ASSIGN_OR_RETURN(const std::string written, ScenarioFileText(settings, "saved.toml"));
  if (text) *text = written;
  DTLAB_ASSIGN_OR_RETURN(const Scenario scenario, ParseScenario(written, "saved.toml"));
  if (scenario.runs.size() != 1)
    return Status::Runtime("the file has " + std::to_string(scenario.runs.size()) + " runs");
  return SettingsOfScenarioRun(scenario.runs.front());
}

// The option a file holds `option`'s value under (its own, or its file_key's).
const RunOption& InFile(const RunOption& option) {
  return *FindRunOptionByKey(option.key.empty() ? option.file_key : option.key);
}

TEST(ScenarioWriterTest, EveryOptionIsHeldLeftOutOrRefused) {
  for (const RunOption& option : RunOptionTable()) {
    SCOPED_TRACE(std::string(option.Id()));
    if (!option.key.empty()) {
      EXPECT_NE(option.read, nullptr) << "a file's option is written and compared through its read";
    }
    if (!option.file_key.empty()) {
      EXPECT_TRUE(option.key.empty()) << "a file_key is for a flag without a key";
      const RunOption* held = FindRunOptionByKey(option.file_key);
      ASSERT_NE(held, nullptr) << option.file_key << " is no key of the table";
      EXPECT_NE(held->read, nullptr);
      EXPECT_NE(option.read, nullptr);
    }
    if (option.process_only) {
      EXPECT_NE(option.read, nullptr) << "a process-only option is named in the file's comment";
      EXPECT_TRUE(option.key.empty() && option.file_key.empty()) << "process-only, yet a file holds it";
    }
  }
}

// A value other than the command line's default for every option with a flag and
// a key (and --dataset, a file's data.source), with the flags it needs beside it.
struct Sample {
  std::string value;  // "" for a switch
  std::vector<std::string> with;
};
const std::map<std::string, Sample>& Samples() {
  static const std::map<std::string, Sample> kSamples = {
      {"model", {"linear", {}}},
      {"dropout-rng", {"per-replica", {}}},
      {"dataset", {"relative/idx-dir", {}}},
      {"epochs", {"3", {}}},
      {"batch-per-replica", {"16", {}}},
      {"global-batch", {"10", {}}},
      {"optimizer", {"sgd", {}}},
      {"lr", {"0.05", {}}},
      {"momentum", {"0.9", {"--optimizer", "sgd"}}},
      {"accumulation-steps", {"4", {}}},
      {"accumulation", {"keras", {}}},
      {"precision", {"mixed_bfloat16", {}}},
      {"loss-scale", {"dynamic", {}}},
      {"loss-scale-initial", {"1024", {"--loss-scale", "dynamic"}}},
      {"loss-scale-growth-steps", {"10", {"--loss-scale", "dynamic"}}},
      {"loss-scale-check", {"first-replica", {"--loss-scale", "dynamic"}}},
      {"seed", {"7", {}}},
      {"steps", {"3", {}}},
      {"checkpoint-every", {"2", {}}},
      {"shuffle-buffer", {"100", {}}},
      {"strategy", {"central_storage", {}}},
      {"replicas", {"3", {}}},  // mirrored by the command line's dependent default
      {"workers", {"2", {"--strategy", "multi_worker_mirrored", "--replicas", "4"}}},
      {"all-reduce", {"tree", {"--replicas", "2"}}},
      {"fold-above", {"1", {"--replicas", "2"}}},
      {"exact-all-reduce", {"words", {"--math", "exact", "--replicas", "2"}}},
      {"convention", {"ddp", {"--replicas", "2"}}},
      {"loss-denominator", {"per-replica", {}}},
      {"check-reference", {"", {}}},
      {"math", {"exact", {}}},
      {"regularization-split", {"exact", {}}},
      {"regularization-scaling", {"unscaled", {}}},
      {"empty-replica-loss", {"error", {}}},
      {"loss-reduction", {"sum", {}}},
      {"keras", {"2", {}}},
      {"inject-fault", {"die:replica=1,step=1", {"--replicas", "2"}}},
      {"collective-timeout", {"30", {}}},
      {"input", {"function", {}}},
      {"rebatch", {"legacy", {}}},
      {"auto-shard", {"off", {}}},
      {"drop-remainder", {"", {}}},
      {"topology", {"switch", {}}},
      {"parameter-servers", {"2", {"--strategy", "parameter_server", "--workers", "2"}}},
      {"straggler-spread", {"0.25", {"--strategy", "parameter_server", "--workers", "2"}}},
  };
  return kSamples;
}

// For every option a file holds: set on the command line to a value other than its
// default, written, and read back from the file, it is the same value, and so is
// every other option. An option added to the table without a sample fails here.
TEST(ScenarioWriterTest, EveryOptionAFileHoldsReadsBackTheSame) {
  ASSERT_TRUE(FromFlags({}).ok());
  const RunSettings defaults = *FromFlags({});
  for (const RunOption& option : RunOptionTable()) {
    if (option.flag.empty() || (option.key.empty() && option.file_key.empty())) continue;
    SCOPED_TRACE("--" + std::string(option.flag));
    const auto sample = Samples().find(std::string(option.flag));
    ASSERT_NE(sample, Samples().end()) << "no sample value: add one to Samples()";
    std::vector<std::string> args = {"--" + std::string(option.flag)};
    if (!sample->second.value.empty()) args.push_back(sample->second.value);
    args.insert(args.end(), sample->second.with.begin(), sample->second.with.end());
    const auto given = FromFlags(args);
    ASSERT_TRUE(given.ok()) << given.status().message();
    EXPECT_NE(option.read(*given), option.read(defaults)) << "the sample is the default";
    std::string text;
    const auto from_file = ThroughTheFile(*given, &text);
    ASSERT_TRUE(from_file.ok()) << from_file.status().message();
    const std::string key(InFile(option).key);
    EXPECT_NE(text.find("\n" + key.substr(key.find('.') + 1) + " = "), std::string::npos) << text;
    EXPECT_EQ(option.read(*given), InFile(option).read(*from_file)) << text;
    for (const RunOption& other : RunOptionTable())
      if (!other.flag.empty() && !other.key.empty()) {
        EXPECT_EQ(other.read(*given), other.read(*from_file)) << "--" << other.flag << " in\n" << text;
      }
  }
}

TEST(ScenarioWriterTest, ARelativeDatasetDirectoryIsWrittenAbsolute) {
  const auto given = FromFlags({"--dataset", "relative/idx-dir"});
  ASSERT_TRUE(given.ok());
  std::string text;
  const auto from_file = ThroughTheFile(*given, &text);
  ASSERT_TRUE(from_file.ok()) << from_file.status().message();
  const std::string absolute = (std::filesystem::current_path() / "relative/idx-dir").string();
  EXPECT_EQ(from_file->data.source, absolute);
  EXPECT_NE(text.find("source = \"" + absolute + "\""), std::string::npos) << text;
}

// The command line's defaults that a file's differ from are written although not
// given: 10 epochs (a file's runs take 1), mirrored for more than one replica.
TEST(ScenarioWriterTest, DefaultsThatDifferAreWritten) {
  const auto given = FromFlags({"--replicas", "4", "--steps", "2"});
  ASSERT_TRUE(given.ok());
  std::string text;
  ASSERT_TRUE(ThroughTheFile(*given, &text).ok());
  EXPECT_NE(text.find("[cluster]\nstrategy = \"mirrored\"\nreplicas = 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[run]\nsteps = 2\nepochs = 10\n"), std::string::npos) << text;
  EXPECT_NE(text.find("title = \"dtlab train --steps 2 --replicas 4\"\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("[data]"), std::string::npos) << "nothing of [data] differs:\n" << text;
}

TEST(ScenarioWriterTest, ProcessOnlyOptionsAreNamedInAComment) {
  const auto given = FromFlags({"--threads", "2", "--json", "--no-progress", "--trace", "t.json", "--steps", "1"});
  ASSERT_TRUE(given.ok());
  std::string text;
  ASSERT_TRUE(ThroughTheFile(*given, &text).ok());
  EXPECT_NE(text.find("# Not part of the scenario (how the process runs, not what it computes): --threads 2, "
                      "--trace t.json, --json, --no-progress\n"),
            std::string::npos)
      << text;
}

// Every flag without a key that is not process-only is refused, named, never dropped.
TEST(ScenarioWriterTest, OptionsAScenarioCannotHoldAreRefused) {
  // A value where "x" or "2" is not one, and the flags an option needs beside it.
  const std::map<std::string, std::vector<std::string>> values = {{"lr-schedule", {"1:1e-3"}},
                                                                  {"dump-step", {"2", "--dump-dir", "d"}}};
  int refused = 0;
  for (const RunOption& option : RunOptionTable()) {
    if (option.flag.empty() || !option.key.empty() || !option.file_key.empty() || option.process_only) continue;
    SCOPED_TRACE("--" + std::string(option.flag));
    std::vector<std::string> args = {"--" + std::string(option.flag)};
    if (option.type != OptionType::kSwitch) {
      const auto it = values.find(std::string(option.flag));
      if (it != values.end())
        args.insert(args.end(), it->second.begin(), it->second.end());
      else
        args.push_back(option.type == OptionType::kText ? "x" : "2");
    }
    const auto given = FromFlags(args);
    ASSERT_TRUE(given.ok()) << given.status().message();
    const auto text = ScenarioFileText(*given, "saved.toml");
    ASSERT_FALSE(text.ok());
    EXPECT_EQ(text.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(text.status().message().find("a scenario file has no key for --" + std::string(option.flag)),
              std::string::npos)
        << text.status().message();
    ++refused;
  }
  EXPECT_GE(refused, 10);  // --lr-schedule, --checkpoint-dir, the cost model's units, ...
  const auto two = FromFlags({"--lr-schedule", "tutorial", "--checkpoint-dir", "d"});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(ScenarioFileText(*two, "saved.toml").status().message(),
            "--save-scenario: a scenario file has no key for --lr-schedule, --checkpoint-dir (docs/scenarios.md, "
            "\"From a command line to a scenario file\"); leave them out to save this run");
}

// A value the command line takes but a file's range refuses is an error naming the key.
TEST(ScenarioWriterTest, AValueOutsideAFilesRangeIsRefused) {
  const auto given = FromFlags({"--seed", "18446744073709551615"});
  ASSERT_TRUE(given.ok());
  const auto text = ScenarioFileText(*given, "saved.toml");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(text.status().message(),
            "--save-scenario: --seed 18446744073709551615 is outside what a scenario file's run.seed holds (0 to "
            "9223372036854775807)");
  const auto too_many_epochs = FromFlags({"--epochs", "5000"});  // a file takes at most 1000
  ASSERT_TRUE(too_many_epochs.ok());
  EXPECT_EQ(ScenarioFileText(*too_many_epochs, "saved.toml").status().code(), Status::Code::kInvalidArgument);
}

TEST(ScenarioWriterTest, SaveRefusesADirectoryAndAMissingFolder) {
  const std::filesystem::path dir = std::filesystem::path(DTLAB_TEST_TMPDIR) / "scenario_writer";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto given = FromFlags({"--steps", "1"});
  ASSERT_TRUE(given.ok());
  const Status into_directory = SaveScenarioFile(*given, dir.string());
  EXPECT_EQ(into_directory.code(), Status::Code::kInvalidArgument) << into_directory.message();
  EXPECT_NE(into_directory.message().find("directory"), std::string::npos) << into_directory.message();
  const Status missing_folder = SaveScenarioFile(*given, (dir / "no-such-folder" / "s.toml").string());
  EXPECT_EQ(missing_folder.code(), Status::Code::kInvalidArgument) << missing_folder.message();
  EXPECT_NE(missing_folder.message().find("does not exist"), std::string::npos) << missing_folder.message();
  const std::string path = (dir / "s.toml").string();
  ASSERT_TRUE(SaveScenarioFile(*given, path).ok());
  const auto loaded = LoadScenario(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->runs.front().config.max_steps, 1);
  for (const auto& entry : std::filesystem::directory_iterator(dir))  // no temporary file left behind
    EXPECT_EQ(entry.path().filename(), "s.toml");
}

}  // namespace
}  // namespace dtlab
