// The run option table (scenarios/run_options.h): every option described once, and
// a flag (cli/run_flags.h) and its scenario key (--set) build the same config and
// refuse a bad value with the same message.
#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/command.h"
#include "cli/run_flags.h"
#include "scenarios/run_options.h"
#include "scenarios/scenario.h"
#include "sim/comm/faults.h"

namespace dtlab {
namespace {

namespace po = boost::program_options;

// A scenario whose main run takes one step of one epoch; the flags say the same.
constexpr const char* kScenario = R"(title = "t"
[run]
steps = 1
[[check]]
kind = "reference"
expect = "pass"
)";
const std::vector<std::string> kBaseFlags = {"--steps", "1", "--epochs", "1"};

// Every field a run option with both a flag and a key sets, as text.
std::string Describe(const TrainConfig& c) {
  const ClusterConfig& k = c.cluster;
  std::ostringstream out;
  out << "model " << c.model << " epochs " << c.epochs << " batch " << c.batch_per_replica << " global "
      << c.global_batch.value_or(-1) << " optimizer " << c.optimizer << " lr " << c.learning_rate.value_or(-1)
      << " momentum " << c.momentum << " accumulation " << k.accumulation.steps << " "
      << AccumulationRuleName(k.accumulation.rule) << " seed " << c.seed << " steps " << c.max_steps << " every "
      << c.checkpoint_every << " shuffle " << c.shuffle_buffer << " strategy " << StrategyName(k.strategy)
      << " replicas " << k.replicas << " workers " << k.workers << " all_reduce "
      << AllReduceAlgorithmName(k.all_reduce) << " convention " << ConventionName(k.convention) << " denominator "
      << LossDenominatorName(k.denominator) << " check " << k.check_reference << " math " << MathModeName(k.math)
      << " split " << (k.regularization_split ? RegularizationSplitName(*k.regularization_split) : "unset")
      << " scaling " << RegularizationScalingName(k.regularization_scaling) << " empty "
      << EmptyReplicaLossName(k.empty_replica) << " reduction " << LossReductionName(k.reduction) << " keras "
      << KerasVersionName(k.keras) << " timeout " << k.collective_timeout_seconds << " input " << InputApiName(c.input)
      << " rebatch " << RebatchRuleName(c.rebatch) << " shard " << AutoShardPolicyName(c.shard_policy) << " drop "
      << c.drop_remainder << " topology " << TopologyKindName(c.topology) << " ps " << c.parameter_servers << " spread "
      << c.straggler_spread << " faults";
  for (const FaultSpec& fault : k.faults) out << " " << FaultSpecText(fault);
  return out.str();
}

// The run `dtlab train` would build from these flags, or the first error.
StatusOr<TrainConfig> FromFlags(std::vector<std::string> args) {
  for (std::size_t i = 0; i < kBaseFlags.size(); i += 2)
    if (std::find(args.begin(), args.end(), kBaseFlags[i]) == args.end())
      args.insert(args.begin(), {kBaseFlags[i], kBaseFlags[i + 1]});
  DTLAB_ASSIGN_OR_RETURN(const RunSettings settings, cli::RunSettingsFromArguments(args));
  DTLAB_RETURN_IF_ERROR(settings.config.Validate());
  return settings.config;
}

// The main run of kScenario with these --set overrides, or the first error.
StatusOr<TrainConfig> FromSets(const std::vector<std::string>& sets) {
  DTLAB_ASSIGN_OR_RETURN(const Scenario scenario, ParseScenario(kScenario, "t.toml", sets));
  return scenario.runs.at(0).config;
}

TEST(OptionsTableTest, EveryEntryIsComplete) {
  std::set<std::string_view> flags, keys;
  for (const RunOption& option : RunOptionTable()) {
    SCOPED_TRACE(std::string(option.Id()));
    EXPECT_FALSE(option.flag.empty() && option.key.empty()) << "an option needs a flag or a key";
    EXPECT_FALSE(option.help.empty());
    EXPECT_NE(option.apply, nullptr);
    if (!option.flag.empty()) {
      EXPECT_TRUE(flags.insert(option.flag).second) << "flag twice";
    }
    if (!option.key.empty()) {
      EXPECT_TRUE(keys.insert(option.key).second) << "key twice";
    }
    if (!option.key.empty()) {
      EXPECT_EQ(FindRunOptionByKey(option.key), &option);
    }
    if (!option.flag.empty()) {
      EXPECT_EQ(FindRunOptionByFlag(option.flag), &option);
    }
    const bool integer =
        option.type == OptionType::kInt32 || option.type == OptionType::kInt64 || option.type == OptionType::kUint64;
    if (integer && !option.key.empty()) {
      EXPECT_LT(option.min, option.max) << "a file's integer needs a range";
    }
    if (option.default_text.empty()) continue;
    auto value = ParseOptionText(option, option.default_text);
    ASSERT_TRUE(value.ok()) << value.status().message();
    RunSettings settings;
    EXPECT_TRUE(option.apply(*value, settings).ok());
  }
  // Every key is in exactly one section of the file format, and every section's key is in the table.
  std::set<std::string> listed;
  for (const RunOptionSection& section : RunOptionSections())
    for (const std::string_view key : section.keys) {
      const std::string full = std::string(section.name) + "." + std::string(key);
      EXPECT_NE(FindRunOptionByKey(full), nullptr) << full;
      EXPECT_TRUE(listed.insert(full).second) << full << " listed twice";
    }
  EXPECT_EQ(listed.size(), keys.size());
}

// The table's defaults are the config's own, so a run without flags and a scenario
// without keys start from the same place. The one exception is the latency: the
// command line's 5 us is 5 x 1e-6, one ULP from LinkParameters' 5e-6.
TEST(OptionsTableTest, DefaultsAreTheConfigsOwn) {
  RunSettings defaults, applied;
  for (const RunOption& option : RunOptionTable()) {
    if (option.default_text.empty()) continue;
    auto value = ParseOptionText(option, option.default_text);
    ASSERT_TRUE(value.ok()) << option.Id();
    ASSERT_TRUE(option.apply(*value, applied).ok()) << option.Id();
  }
  EXPECT_EQ(Describe(applied.config), Describe(defaults.config));
  EXPECT_DOUBLE_EQ(applied.config.link.latency_seconds, defaults.config.link.latency_seconds);
  EXPECT_EQ(applied.config.link.bandwidth_bytes_per_second, defaults.config.link.bandwidth_bytes_per_second);
  EXPECT_EQ(applied.config.device_flops_per_second, defaults.config.device_flops_per_second);
  EXPECT_EQ(applied.config.trace_steps, defaults.config.trace_steps);
  EXPECT_EQ(applied.config.dataset, defaults.config.dataset);
  EXPECT_EQ(applied.config.max_to_keep, defaults.config.max_to_keep);
  EXPECT_EQ(applied.threads, defaults.threads);
  EXPECT_EQ(applied.backend, defaults.backend);
  EXPECT_EQ(applied.streams, defaults.streams);
  EXPECT_EQ(applied.replicas_per_worker, defaults.replicas_per_worker);
}

struct Sample {
  std::vector<std::pair<std::string, std::string>> values;  // flag, value ("" for a switch)
  std::vector<std::string> sets;                            // the same as --set overrides
};

TEST(OptionsTableTest, FlagAndKeyGiveTheSameConfig) {
  const std::vector<Sample> samples = {
      {{}, {}},
      {{{"model", "linear"}, {"batch-per-replica", "16"}, {"seed", "7"}, {"steps", "3"}},
       {"model.name=linear", "data.batch_per_replica=16", "run.seed=7", "run.steps=3"}},
      {{{"strategy", "mirrored"}, {"replicas", "3"}, {"global-batch", "10"}, {"shuffle-buffer", "100"}},
       {"cluster.strategy=mirrored", "cluster.replicas=3", "data.global_batch=10", "data.shuffle_buffer=100"}},
      {{{"optimizer", "sgd"}, {"lr", "0.05"}, {"momentum", "0.9"}, {"checkpoint-every", "2"}},
       {"optimizer.name=sgd", "optimizer.learning_rate=0.05", "optimizer.momentum=0.9", "run.checkpoint_every=2"}},
      {{{"accumulation-steps", "4"}, {"accumulation", "keras"}},
       {"optimizer.accumulation_steps=4", "optimizer.accumulation=keras"}},
      {{{"model", "seed-cnn"},
        {"precision", "mixed_float16"},
        {"loss-scale-initial", "1024"},
        {"loss-scale-growth-steps", "10"},
        {"loss-scale-check", "first-replica"}},
       {"model.name=seed-cnn", "model.precision=mixed_float16", "optimizer.loss_scale_initial=1024",
        "optimizer.loss_scale_growth_steps=10", "optimizer.loss_scale_check=first-replica"}},
      {{{"model", "seed-cnn"}, {"precision", "mixed_bfloat16"}, {"loss-scale", "dynamic"}},
       {"model.name=seed-cnn", "model.precision=mixed_bfloat16", "optimizer.loss_scale=dynamic"}},
      // The dependent defaults: tpu trains on a torus, parameter_server has a replica per worker.
      {{{"strategy", "tpu"}, {"replicas", "4"}}, {"cluster.strategy=tpu", "cluster.replicas=4"}},
      {{{"strategy", "tpu"}, {"replicas", "4"}, {"topology", "ring"}},
       {"cluster.strategy=tpu", "cluster.replicas=4", "cluster.topology=ring"}},
      {{{"strategy", "parameter_server"}, {"workers", "2"}, {"parameter-servers", "2"}, {"straggler-spread", "0.25"}},
       {"cluster.strategy=parameter_server", "cluster.workers=2", "cluster.parameter_servers=2",
        "cluster.straggler_spread=0.25"}},
      {{{"strategy", "multi_worker_mirrored"}, {"replicas", "4"}, {"workers", "2"}, {"all-reduce", "tree"}},
       {"cluster.strategy=multi_worker_mirrored", "cluster.replicas=4", "cluster.workers=2",
        "cluster.all_reduce=tree"}},
      {{{"strategy", "mirrored"}, {"replicas", "8"}, {"fold-above", "4"}},
       {"cluster.strategy=mirrored", "cluster.replicas=8", "cluster.fold_above=4"}},
      {{{"math", "exact"}, {"strategy", "mirrored"}, {"replicas", "2"}, {"exact-all-reduce", "words"}},
       {"run.math=exact", "cluster.strategy=mirrored", "cluster.replicas=2", "cluster.exact_all_reduce=words"}},
      {{{"strategy", "mirrored"},
        {"replicas", "2"},
        {"convention", "ddp"},
        {"loss-denominator", "default"},
        {"regularization-split", "exact"},
        {"regularization-scaling", "unscaled"},
        {"empty-replica-loss", "error"},
        {"loss-reduction", "sum"},
        {"keras", "2"}},
       {"cluster.strategy=mirrored", "cluster.replicas=2", "loss.convention=ddp", "loss.denominator=default",
        "loss.split=exact", "loss.regularization=unscaled", "loss.empty_replica=error", "loss.reduction=sum",
        "loss.keras=\"2\""}},
      {{{"keras", "2"}}, {"loss.keras=2"}},
      {{{"model", "models/cnn.json"}, {"dropout-rng", "per-replica"}},
       {"model.name=\"models/cnn.json\"", "run.dropout_rng=per-replica"}},
      {{{"strategy", "mirrored"},
        {"replicas", "2"},
        {"check-reference", ""},
        {"math", "exact"},
        {"inject-fault", "die:replica=1,step=1"},
        {"collective-timeout", "30"}},
       {"cluster.strategy=mirrored", "cluster.replicas=2", "run.check_reference=true", "run.math=exact",
        "run.faults=[\"die:replica=1,step=1\"]", "run.collective_timeout=30"}},
      {{{"input", "function"},
        {"rebatch", "legacy"},
        {"auto-shard", "off"},
        {"drop-remainder", ""},
        {"topology", "switch"}},
       {"data.input=function", "data.rebatch=legacy", "data.shard=off", "data.drop_remainder=true",
        "cluster.topology=switch"}},
  };
  std::set<std::string> covered;
  for (const Sample& sample : samples) {
    std::vector<std::string> args;
    for (const auto& [flag, value] : sample.values) {
      args.push_back("--" + flag);
      if (!value.empty()) args.push_back(value);
      covered.insert(flag);
    }
    SCOPED_TRACE(::testing::PrintToString(args));
    auto from_flags = FromFlags(args);
    auto from_sets = FromSets(sample.sets);
    ASSERT_TRUE(from_flags.ok()) << from_flags.status().message();
    ASSERT_TRUE(from_sets.ok()) << from_sets.status().message();
    EXPECT_EQ(Describe(*from_flags), Describe(*from_sets));
  }
  // The samples set every option that has both a flag and a key.
  for (const RunOption& option : RunOptionTable())
    if (!option.flag.empty() && !option.key.empty() && option.flag != "epochs") {
      EXPECT_TRUE(covered.count(std::string(option.flag))) << option.flag << " has no sample";
    }
}

// A bad name or fault spec is refused with the same words from a flag and from a
// file, where the file's message adds the file, the line and the key.
TEST(OptionsTableTest, BadValuesGiveTheSameMessage) {
  for (const RunOption& option : RunOptionTable()) {
    if (option.flag.empty() || option.key.empty()) continue;
    if (option.type != OptionType::kName && option.type != OptionType::kTextList) continue;
    SCOPED_TRACE(std::string(option.Id()));
    const std::string set = option.type == OptionType::kName ? "bogus" : "[\"bogus\"]";
    auto from_flags = FromFlags({"--" + std::string(option.flag), "bogus"});
    auto from_sets = FromSets({std::string(option.key) + "=" + set});
    ASSERT_FALSE(from_flags.ok());
    ASSERT_FALSE(from_sets.ok());
    const std::string& message = from_flags.status().message();
    const std::string where = "t.toml: in a --set or [[variant]] set: ";
    std::string key;  // appended, not "'" + std::string: GCC 12's -Wrestrict false positive
    if (option.type == OptionType::kName) key.append("'").append(option.key).append("': ");
    EXPECT_EQ(from_sets.status().message(), where + key + message);
  }
}

// --help lists the flags by group (RunOptionGroups()' order), in the table's order
// within a group, each once.
TEST(OptionsTableTest, TrainCommandFlagsFollowTheTable) {
  po::options_description options("Options");
  cli::AddRunFlags(options);
  std::vector<std::string> listed, expected;
  for (const auto& option : options.options()) listed.push_back(option->long_name());
  for (const RunOptionGroup& group : RunOptionGroups())
    for (const RunOption& option : RunOptionTable())
      if (!option.flag.empty() && option.group == group.group) expected.emplace_back(option.flag);
  EXPECT_EQ(listed, expected);
  EXPECT_EQ(options.find("epochs", false).format_parameter(), "arg (=10)");
  EXPECT_EQ(options.find("check-reference", false).format_parameter(), "");
}

}  // namespace
}  // namespace dtlab
