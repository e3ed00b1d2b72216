#include "scenarios/scenario.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "core/file_io.h"
#include "core/model.h"
#include "core/text.h"
#include "scenarios/table_reader.h"

namespace dtlab {
namespace {

// Applies "a.b.c=value" to `root`: the value is TOML ("4", "true", "\"x\"", "[1, 2]"),
// or a bare word taken as a string. Errors name the --set.
Status ApplySet(toml::table& root, const std::string& set, const std::string& origin) {
  const auto equals = set.find('=');
  if (equals == std::string::npos || equals == 0)
    return Status::InvalidArgument(origin + " '" + set + "': expected KEY=VALUE, e.g. cluster.replicas=4");
  const std::string key = set.substr(0, equals), text = set.substr(equals + 1);
  const std::string source = origin + " " + set;
  // A bare word is a string, even where TOML would read a number (nan, inf).
  const bool bare_word = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  }) && text != "true" && text != "false";
  toml::table parsed;
  try {
    parsed = bare_word ? toml::table{{"v", text}} : toml::parse("v = " + text, source);
  } catch (const toml::parse_error&) {
    parsed = toml::table{{"v", text}};
  }
  std::vector<std::string> parts;
  std::stringstream stream(key);
  for (std::string part; std::getline(stream, part, '.');) parts.push_back(part);
  toml::table* table = &root;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    if (parts[i].empty()) return Status::InvalidArgument(origin + " '" + set + "': empty key part");
    toml::node* child = table->get(parts[i]);
    if (!child) child = &table->insert_or_assign(parts[i], toml::table{}).first->second;
    if (!child->is_table())
      return Status::InvalidArgument(origin + " '" + set + "': '" + parts[i] + "' is not a table");
    table = child->as_table();
  }
  if (parts.empty() || parts.back().empty()) return Status::InvalidArgument(origin + " '" + set + "': empty key");
  // The copy keeps the value's source (the --set), so errors about it name the --set.
  parsed.get("v")->visit([&](auto& v) {
    using V = std::decay_t<decltype(v)>;
    if constexpr (toml::is_value<V>) {
      table->insert_or_assign(parts.back(), toml::value<typename V::value_type>(v));
    } else {
      table->insert_or_assign(parts.back(), V(v));
    }
  });
  return Status::Ok();
}

const toml::table* Section(const toml::table& root, std::string_view name, TableReader& top) {
  const toml::node* node = root.get(name);
  if (!node) return nullptr;
  if (!node->is_table()) {
    top.Fail(*node, "'" + std::string(name) + "' must be a table ([" + std::string(name) + "])");
    return nullptr;
  }
  return node->as_table();
}

// The base run's configuration from the whole document: each section's keys
// through the run option table (scenarios/run_options.h).
void ReadRun(const toml::table& root, const std::string& path, ScenarioRun& run, Status* status) {
  TableReader top(root, "", path, status);
  RunSettings settings;
  TrainConfig& c = settings.config;
  c.epochs = 1;  // a scenario's runs are short: one epoch unless it says otherwise
  for (const RunOptionSection& section : RunOptionSections()) {
    const toml::table* t = Section(root, section.name, top);
    if (!t) continue;
    TableReader r(*t, std::string(section.name), path, status);
    r.AllowOnly(section.keys);
    for (const std::string_view key : section.keys)
      r.Option(*FindRunOptionByKey(std::string(section.name) + "." + std::string(key)), key, settings);
    if (!r.ok()) continue;
    std::string& source = settings.data.source;
    if (section.name == "data" && source != "fashion-mnist" && source != "mnist" && source != "synthetic" &&
        !source.empty() && source[0] != '/')  // a directory relative to the scenario file
      source = (std::filesystem::path(path).parent_path() / source).string();
    if (section.name != "model") continue;
    if (!r.Has("name")) r.FailHere("[model] needs name");
    if (IsModelFile(c.model)) {  // a Keras model file, relative to the scenario file
      if (!c.model.empty() && c.model[0] != '/')
        c.model = (std::filesystem::path(path).parent_path() / c.model).string();
      continue;
    }
    const auto models = ListModels();
    const bool known = std::any_of(models.begin(), models.end(), [&](const auto& m) { return m.name == c.model; });
    if (r.ok() && !known)
      r.Fail(*t->get("name"), "unknown model '" + c.model +
                                  "'; allowed values: " + JoinText(models, ", ", [](const auto& m) { return m.name; }));
  }
  if (!status->ok()) return;
  ApplyDependentDefaults(settings, OptionSource::kScenarioFile);
  run.config = std::move(settings.config);
  run.data = std::move(settings.data);
  if (Status valid = run.config.Validate(); !valid.ok() && valid.message().find("reduction") == std::string::npos)
    *status = Status::InvalidArgument(path + ": run '" + run.name + "': " + valid.message());
}

void ReadCheck(const toml::table& t, const std::string& path, const std::set<std::string>& runs, ScenarioCheck& check,
               Status* status) {
  TableReader r(t, "check", path, status);
  check.line = static_cast<int>(t.source().begin.line);
  r.AllowOnly({"kind",
               "label",
               "run",
               "runs",
               "value",
               "min",
               "max",
               "approx",
               "tolerance",
               "contains",
               "expect",
               "code",
               "replicas",
               "workers",
               "global_batch",
               "batch",
               "rebatch",
               "weights",
               "values_per_example",
               "replica_losses",
               "algorithm",
               "count"});
  std::string kind, expect;
  r.String("kind", kind);
  r.String("expect", expect);
  r.Text("label", check.label);
  if (!r.ok()) return;
  static const std::vector<std::pair<std::string, ScenarioCheckKind>> kKinds = {
      {"reference", ScenarioCheckKind::kReference},
      {"bitwise_equal", ScenarioCheckKind::kBitwiseEqual},
      {"value", ScenarioCheckKind::kValue},
      {"refused", ScenarioCheckKind::kRefused},
      {"fault", ScenarioCheckKind::kFault},
      {"loss_case", ScenarioCheckKind::kLossCase},
      {"mean_metric", ScenarioCheckKind::kMeanMetric},
      {"compare", ScenarioCheckKind::kCompare},
      {"all_reduce", ScenarioCheckKind::kAllReduce}};
  bool found = false;
  for (const auto& [name, value] : kKinds)
    if (name == kind) check.kind = value, found = true;
  if (!found)
    return r.Fail(
        t.get("kind") ? *t.get("kind") : static_cast<const toml::node&>(t),
        "check kind '" + kind + "' is not one of: " + JoinText(kKinds, ", ", [](const auto& k) { return k.first; }));
  if (expect != "pass" && expect != "fail")
    return r.Fail(t.get("expect") ? *t.get("expect") : static_cast<const toml::node&>(t),
                  "[[check]] needs expect = \"pass\" or \"fail\" (the verdict this check must give)");
  check.expect_pass = expect == "pass";
  const bool reads_runs = check.kind != ScenarioCheckKind::kLossCase && check.kind != ScenarioCheckKind::kMeanMetric &&
                          check.kind != ScenarioCheckKind::kAllReduce;
  std::string run = "main";
  r.String("run", run);
  check.runs = {run};
  r.StringList("runs", check.runs);
  if (r.ok() && reads_runs && runs.empty())
    return r.FailHere("this check reads a training run, but the scenario has none: add a [run] table");
  for (const auto& name : check.runs)
    if (r.ok() && reads_runs && !runs.count(name)) {
      r.Fail(t.get("runs") ? *t.get("runs") : *t.get("run"),
             "no run named '" + name + "'; runs: " + JoinText(runs, ", "));
    }
  r.String("value", check.value);
  r.OptionalReal("min", check.min);
  r.OptionalReal("max", check.max);
  if (const toml::node* approx = t.get("approx"); approx && approx->is_string())
    check.approx_value = approx->as_string()->get();
  else
    r.OptionalReal("approx", check.approx);
  r.Tolerance("tolerance", check.tolerance);
  r.String("contains", check.contains);
  if (!r.ok()) return;
  switch (check.kind) {
    case ScenarioCheckKind::kBitwiseEqual:
      if (check.runs.size() != 2) r.FailHere("a bitwise_equal check needs runs = [\"a\", \"b\"] (two runs)");
      break;
    case ScenarioCheckKind::kCompare:
      if (check.runs.size() != 2)
        return r.FailHere("a compare check needs runs = [\"a\", \"b\"] (value of a < value of b)");
      [[fallthrough]];
    case ScenarioCheckKind::kValue: {
      bool known = false, known_approx = check.approx_value.empty();
      for (const auto& [name, meaning] : ScenarioValueNames())
        known |= name == check.value, known_approx |= name == check.approx_value;
      if (!known_approx) return r.Fail(*t.get("approx"), "approx names no value: '" + check.approx_value + "'");
      if (!known) {
        r.FailHere("a value check needs value = one of: " +
                   JoinText(ScenarioValueNames(), ", ", [](const auto& v) { return v.first; }));
      } else if (check.kind == ScenarioCheckKind::kValue && !check.min && !check.max && !check.approx &&
                 check.approx_value.empty()) {
        r.FailHere("a value check needs min, max or approx");
      }
      break;
    }
    case ScenarioCheckKind::kLossCase: {
      r.String("code", check.code);
      if (r.ok() && !BuiltinLossCode(check.code).ok()) r.FailHere(BuiltinLossCode(check.code).status().message());
      CheckCase& c = check.loss_case;
      r.Integer("replicas", c.replicas, 1, 1024);
      r.Integer("workers", c.workers, 1, 1024);
      r.Integer("global_batch", c.global_batch, 1, 100000);
      c.batch = c.global_batch;
      r.Integer("batch", c.batch, 0, 100000);
      r.Name("rebatch", c.rule, ParseRebatchRule);
      r.RealList("weights", c.weights);
      r.Integer("values_per_example", c.values_per_example, 1, 1 << 20);
      if (!r.ok()) return;
      if (c.batch > c.global_batch) return r.FailHere("batch must be at most global_batch");
      if (c.replicas % c.workers != 0) return r.FailHere("workers must divide replicas");
      if (!c.weights.empty() && static_cast<std::int64_t>(c.weights.size()) != c.batch)
        return r.FailHere("weights needs one weight per example of the batch (" + std::to_string(c.batch) + ")");
      std::vector<std::int64_t> batch(static_cast<std::size_t>(c.batch));
      std::iota(batch.begin(), batch.end(), 0);
      for (const auto& replica : SplitBatch(batch, c.global_batch, c.replicas, c.rule))
        c.split.push_back(static_cast<std::int64_t>(replica.size()));
      break;
    }
    case ScenarioCheckKind::kAllReduce:
      r.Name("algorithm", check.algorithm, ParseAllReduceAlgorithm);
      r.Integer("replicas", check.replicas, 1, 16);
      r.Integer("count", check.count, 1, 64);
      break;
    case ScenarioCheckKind::kMeanMetric: {
      const toml::node* node = t.get("replica_losses");
      if (!node || !node->is_array()) return r.FailHere("a mean_metric check needs replica_losses = [[2, 3], [4, 5]]");
      for (const toml::node& row : *node->as_array()) {
        if (!row.is_array()) return r.Fail(row, "replica_losses must be a list of lists of numbers");
        check.replica_losses.emplace_back();
        for (const toml::node& v : *row.as_array()) {
          if (!v.is_number()) return r.Fail(v, "replica_losses must be a list of lists of numbers");
          check.replica_losses.back().push_back(v.value<double>().value_or(0));
        }
      }
      r.Integer("global_batch", check.global_batch, 1, 1'000'000);
      if (r.ok() && check.global_batch == 0) r.FailHere("a mean_metric check needs global_batch");
      break;
    }
    default:
      break;
  }
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& ScenarioValueNames() {
  static const std::vector<std::pair<std::string, std::string>> kNames = {
      {"steps", "optimizer steps taken"},
      {"resumed_from_step", "the step a resumed run started from (0: it started afresh)"},
      {"replicas", "replicas in sync"},
      {"global_batch", "the configured global batch"},
      {"first_loss", "the reduced loss of step 1"},
      {"final_loss", "the reduced loss of the last step"},
      {"train_accuracy", "training accuracy of the last epoch (fraction)"},
      {"test_accuracy", "test accuracy at the end (fraction)"},
      {"test_loss", "test loss at the end"},
      {"steps_failed", "steps whose reference check failed"},
      {"first_failed_step", "the first step whose reference check failed (0: none)"},
      {"max_ulp", "largest distance from the reference in ULPs, over all steps"},
      {"gradient_ratio", "|distributed gradient| / |reference gradient| at step 1"},
      {"last_gradient_ratio", "the same at the last step"},
      {"max_gradient_ratio", "the largest ratio over all steps"},
      {"mean_metric_loss", "step 1: a Mean metric over the replicas' scaled losses (the trap)"},
      {"sum_reduced_loss", "step 1: the replicas' scaled losses SUM-reduced (the true mean)"},
      {"mean_metric_ratio", "sum_reduced_loss / mean_metric_loss: how far off the Mean metric reads"},
      {"empty_replica_steps", "steps in which some replica had no examples"},
      {"max_empty_replicas", "the most replicas without examples in one step"},
      {"short_steps", "steps whose batch was smaller than the global batch"},
      {"examples", "training examples processed"},
      {"distinct_fraction", "distinct examples / examples processed (below 1: duplicated data)"},
      {"staleness_mean", "parameter_server: mean staleness of the updates"},
      {"staleness_max", "parameter_server: largest staleness"},
      {"simulated_seconds", "the cost model's time of the run"},
      {"collective_seconds", "the cost model's time in collectives"},
      {"collective_bytes", "bytes the collectives moved between replicas"},
      {"accumulation_steps", "gradient accumulation: micro-batches per optimizer step (accumulating runs only)"},
      {"step_batch", "gradient accumulation: examples per optimizer step, accumulation_steps x global_batch"},
      {"max_example_weight",
       "gradient accumulation: the most any example weighed in an update against its share of one device's step on "
       "the same examples (1: the same; Keras's mean of means gives a short micro-batch's examples more)"},
      {"skipped_steps", "dynamic loss scale: steps whose update was skipped because a gradient overflowed"},
      {"loss_scale", "dynamic loss scale: the scale at the last step"},
  };
  return kNames;
}

Status CheckRunName(std::string_view name) {
  const std::string rule = std::string("a run name becomes a directory name, so it may only use letters, digits, ") +
                           "'.', '_' and '-', at most " + std::to_string(kMaxRunNameLength) +
                           " characters, and may not be '.' or '..'";
  std::string shown(name.substr(0, kMaxRunNameLength));
  if (name.size() > kMaxRunNameLength) shown += "...";
  for (char& s : shown)  // the name is quoted in a message: no control bytes
    if (static_cast<unsigned char>(s) < 0x20 || static_cast<unsigned char>(s) >= 0x7f) s = '?';
  if (name.empty()) return Status::InvalidArgument("a run name is empty; " + rule);
  if (name.size() > kMaxRunNameLength)
    return Status::InvalidArgument("run name '" + shown + "' is " + std::to_string(name.size()) + " characters long; " +
                                   rule);
  if (name == "." || name == "..") return Status::InvalidArgument("run name '" + shown + "' is not allowed; " + rule);
  for (const char c : name) {
    const bool allowed =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!allowed) {
      const auto byte = static_cast<unsigned char>(c);
      const std::string what = byte == '/'                   ? "'/' (a path separator)"
                               : byte >= 0x21 && byte < 0x7f ? "'" + std::string(1, c) + "'"
                                                             : "byte " + std::to_string(byte);
      return Status::InvalidArgument("run name '" + shown + "' contains " + what + "; " + rule);
    }
  }
  return Status::Ok();
}

StatusOr<std::string> RunDirectory(const std::string& parent, const std::string& run_name) {
  DTLAB_RETURN_IF_ERROR(CheckRunName(run_name));
  return parent + "/" + run_name;
}

StatusOr<LossScalingCode> BuiltinLossCode(std::string_view name) { return BuiltinScalingCode(name); }

StatusOr<Scenario> ParseScenario(std::string_view text, const std::string& path, const std::vector<std::string>& sets) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    return Status::InvalidArgument(path + ":" + std::to_string(e.source().begin.line) + ": " +
                                   std::string(e.description()));
  }
  for (const auto& set : sets) DTLAB_RETURN_IF_ERROR(ApplySet(root, set, "--set"));
  Status status;
  TableReader top(root, "", path, &status);
  top.AllowOnly({"title", "description", "headline", "cluster", "data", "model", "loss", "optimizer", "run", "variant",
                 "check", "summary"});
  Scenario scenario;
  scenario.path = path;
  scenario.name = std::filesystem::path(path).stem().string();
  top.Text("title", scenario.title);
  top.Text("description", scenario.description);
  top.Text("headline", scenario.headline);
  top.TextList("summary", scenario.summary);
  if (status.ok() && scenario.title.empty()) top.FailHere("a scenario needs a title = \"...\" at the top");
  DTLAB_RETURN_IF_ERROR(status);

  // Without a [run] table the scenario trains nothing (only loss_case and
  // mean_metric checks); otherwise its base is the run "main".
  std::set<std::string> names;
  const bool trains = root.contains("run");
  if (!trains)
    for (const char* section : {"cluster", "data", "model", "loss", "optimizer", "variant"})
      if (const toml::node* node = root.get(section)) {
        top.Fail(*node, "[" + std::string(section) + "] describes a training run, but the scenario has no [run] table");
        return status;
      }
  if (trains) {
    ScenarioRun main;
    main.name = "main";
    ReadRun(root, path, main, &status);
    DTLAB_RETURN_IF_ERROR(status);
    scenario.runs.push_back(main);
    names.insert("main");
  }
  if (const toml::node* variants = root.get("variant")) {
    if (!variants->is_array_of_tables())
      return Status::InvalidArgument(path + ": 'variant' must be [[variant]] tables");
    for (const toml::node& node : *variants->as_array()) {
      const toml::table& t = *node.as_table();
      TableReader r(t, "variant", path, &status);
      r.AllowOnly({"name", "description", "set", "resume_from"});
      ScenarioRun run;
      r.String("name", run.name);
      r.Text("description", run.description);
      r.StringList("set", run.sets);
      r.String("resume_from", run.resume_from);
      if (status.ok() && run.name.empty()) r.FailHere("a [[variant]] needs a name");
      if (status.ok()) {
        const Status name_ok = CheckRunName(run.name);
        if (!name_ok.ok()) r.Fail(*t.get("name"), "[[variant]] name: " + name_ok.message());
      }
      if (status.ok() && names.count(run.name)) r.FailHere("two runs are named '" + run.name + "'");
      if (status.ok() && !run.resume_from.empty() && !names.count(run.resume_from))
        r.Fail(*t.get("resume_from"), "resume_from '" + run.resume_from + "' names no earlier run");
      DTLAB_RETURN_IF_ERROR(status);
      toml::table copy = root;
      const std::string origin =
          path + ":" + std::to_string(t.source().begin.line) + ": variant '" + run.name + "' set";
      for (const auto& set : run.sets) DTLAB_RETURN_IF_ERROR(ApplySet(copy, set, origin));
      ReadRun(copy, path, run, &status);
      DTLAB_RETURN_IF_ERROR(status);
      names.insert(run.name);
      scenario.runs.push_back(std::move(run));
    }
  }
  if (const toml::node* checks = root.get("check")) {
    if (!checks->is_array_of_tables()) return Status::InvalidArgument(path + ": 'check' must be [[check]] tables");
    for (const toml::node& node : *checks->as_array()) {
      ScenarioCheck check;
      ReadCheck(*node.as_table(), path, names, check, &status);
      DTLAB_RETURN_IF_ERROR(status);
      scenario.checks.push_back(std::move(check));
    }
  }
  if (scenario.checks.empty() && scenario.summary.empty())
    return Status::InvalidArgument(path + ": a scenario needs at least one [[check]] with its expected verdict");
  return scenario;
}

StatusOr<Scenario> LoadScenario(const std::string& path, const std::vector<std::string>& sets) {
  DTLAB_ASSIGN_OR_RETURN(const std::string text, ReadRegularFile(path, kMaxTextFileBytes, "scenario file"));
  return ParseScenario(text, path, sets);
}

}  // namespace dtlab
