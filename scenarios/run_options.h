// The options of one training run, each described once: its `dtlab train` flag,
// its key in scenario files (and in `dtlab run --set`), its default, how its value
// is checked and stored, and its help text (RunOptionTable()).
//
// Every run is built the same way: values read from flags (cli/run_flags.h) or from
// a scenario file (scenarios/scenario.h) go through the same entry's `apply` into
// one RunSettings, then ApplyDependentDefaults, then TrainConfig::Validate. Only
// the reading differs: a flag's text is parsed as the entry's type by the command
// line (its messages: "the argument ('x') for option '--epochs' is invalid"), a
// file's value is a typed TOML value ("'run.epochs' must be an integer"), and a
// file's integers are bounded by the entry's [min, max].
//
// Thread safety: the table is immutable; RunSettings is a value.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/status.h"
#include "sim/training/trainer.h"

namespace dtlab {

/// Where a scenario run's data comes from (scenario files only: `dtlab train` reads
/// TrainConfig::dataset).
struct ScenarioData {
  std::string source = "fashion-mnist";  // fashion-mnist, mnist, synthetic, or a directory
  std::int64_t train_examples = 0;       // the first N training examples (0: all); synthetic: how many
  std::int64_t test_examples = 0;        // the first N test examples (0: all); synthetic: how many (default 500)
};

/// Everything one run is built from.
struct RunSettings {
  TrainConfig config;
  ScenarioData data;  // scenario files only
  // dtlab train only: how the process runs, not what it computes.
  int threads = 0;
  std::string backend = "cpu";
  std::string devices;  // --devices as written (cli's ParseDeviceList reads it)
  int streams = 0;
  std::int32_t replicas_per_worker = 1;
  bool json = false;
  bool no_progress = false;
  /// The options given (not defaulted), by RunOption::Id(): defaults that depend
  /// on other options (ApplyDependentDefaults) read it.
  std::set<std::string, std::less<>> given;

  bool Given(std::string_view id) const { return given.count(id) > 0; }
};

/// What an option's value is: the type a flag's text is parsed as, and the TOML
/// type a file's key must have.
enum class OptionType {
  kSwitch,  // a flag without a value; in a file, true or false
  kInt32,   // integers, in the field's own width
  kInt64,
  kUint64,
  kFloat,  // finite numbers; a float flag's text is read as a float
  kDouble,
  kName,      // one of a fixed set of names (a Parse* function, whose error lists them)
  kText,      // free text: a path, a model's name, a schedule
  kTextList,  // a repeatable flag; in a file, a list of strings
};

/// A value as read from a flag or a file: bool (kSwitch), int64 (kInt32, kInt64),
/// uint64 (kUint64), double (kFloat, kDouble), string (kName, kText) or a list of
/// strings (kTextList).
using OptionValue = std::variant<bool, std::int64_t, std::uint64_t, double, std::string, std::vector<std::string>>;

/// The topic `dtlab train --help` lists an option under; RunOptionGroups() gives
/// their order and titles. kNone is no group: every option of the table has one.
enum class OptionGroup { kNone, kData, kCluster, kLoss, kMath, kCheckpoints, kFaults, kOutputs };

struct RunOptionGroup {
  OptionGroup group;
  std::string_view title;  // "Model and data", as --help prints it before the group's options
};

/// The groups, in the order --help prints them.
const std::vector<RunOptionGroup>& RunOptionGroups();

struct RunOption {
  OptionGroup group = OptionGroup::kNone;  // where --help lists it
  std::string_view flag;                   // dtlab train's --flag, without the dashes; empty: files only
  std::string_view key;                    // "section.key" in scenario files and --set; empty: the command line only
  /// A flag without a key of its own whose value a scenario file holds under
  /// another option's key: --dataset is a file's data.source.
  std::string_view file_key;
  OptionType type = OptionType::kText;
  std::string_view default_text;  // the command line's default as --help shows it; empty: none (the field's own)
  std::int64_t min = 0, max = 0;  // a file's integer must be in [min, max]
  bool integer_name = false;      // a file may write this name as an integer (keras = 2)
  /// How the process runs, not what it computes (--threads, --json, the compute
  /// backend): a scenario leaves it out, and --save-scenario says so in a comment.
  bool process_only = false;
  std::string_view help;
  /// Checks `value` (of this option's type) and stores it; InvalidArgument saying
  /// what is wrong (a name's message lists the allowed names).
  Status (*apply)(const OptionValue& value, RunSettings& settings) = nullptr;
  /// The option's value in `settings`, as apply takes it (apply of it stores the
  /// same value again), or nullopt where the field holds none (no learning rate:
  /// the optimizer's default; no step limit). Every option a scenario file holds
  /// (a key or a file_key) or leaves out (process_only) has one: dtlab train
  /// --save-scenario writes and compares through it (scenarios/scenario_writer.h).
  /// Null for an option a scenario cannot express (--save-scenario refuses it).
  std::optional<OptionValue> (*read)(const RunSettings& settings) = nullptr;

  /// The name RunSettings::given uses: the flag, or for a file-only option its key.
  std::string_view Id() const { return flag.empty() ? key : flag; }
};

/// Every option of a run, in the order `dtlab train --help` lists them.
const std::vector<RunOption>& RunOptionTable();

/// The option with this flag (no dashes) or key ("cluster.replicas"); null if none.
const RunOption* FindRunOptionByFlag(std::string_view flag);
const RunOption* FindRunOptionByKey(std::string_view key);

/// A section of a scenario file's run and its keys, in the order the file format
/// documents them (an unknown key's message lists them so, and they are read so).
struct RunOptionSection {
  std::string_view name;               // "cluster"
  std::vector<std::string_view> keys;  // "strategy", ... (each "name.key" is in the table)
};
const std::vector<RunOptionSection>& RunOptionSections();

/// Parses a flag's text as the option's type (as the command line does, without
/// its messages): for tests and for reading the defaults. InvalidArgument if it
/// does not parse.
StatusOr<OptionValue> ParseOptionText(const RunOption& option, std::string_view text);

/// Where a run's options came from.
enum class OptionSource { kCommandLine, kScenarioFile };

/// The defaults that depend on other options, for every run: parameter_server
/// without replicas gives one replica per worker; tpu without a topology trains
/// on a 2-D torus. On the command line only, more than one replica without a
/// strategy gives mirrored (a scenario file names its strategy, and one_device
/// refuses more replicas).
void ApplyDependentDefaults(RunSettings& settings, OptionSource source);

}  // namespace dtlab
