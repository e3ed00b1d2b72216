#include "scenarios/scenario_writer.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>
#include <variant>
#include <vector>

#include "core/file_io.h"
#include "core/text.h"

namespace dtlab {
namespace {

// The key a scenario file holds an option's value under; empty: none.
std::string_view FileKey(const RunOption& option) { return option.key.empty() ? option.file_key : option.key; }

// A TOML basic string: quotes, backslashes and control characters escaped.
std::string TomlString(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\', out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04X", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// The shortest text that reads back as the same number: a float option's value is
// a float (as its flag parsed it), so its float digits suffice ("0.001").
std::string NumberText(double value, bool single) {
  char text[64];
  const auto result = single ? std::to_chars(text, text + sizeof text, static_cast<float>(value))
                             : std::to_chars(text, text + sizeof text, value);
  std::string out(text, result.ptr);
  if (out.find_first_of(".e") == std::string::npos) out += ".0";  // TOML reads "60" as an integer
  return out;
}

// An option's value in TOML syntax, as the scenario loader reads its type.
std::string TomlValue(const RunOption& option, const OptionValue& value) {
  const bool single = option.type == OptionType::kFloat;
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          return NumberText(v, single);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return TomlString(v);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          // Appended, not "[" + ...: GCC 12 warns about that (-Wrestrict, a false positive).
          std::string list = "[";
          list.append(JoinText(v, ", ", [](const std::string& s) { return TomlString(s); }));
          return list.append("]");
        } else {
          return std::to_string(v);
        }
      },
      value);
}

// A word of a shell command line: quoted when it holds anything but plain characters.
std::string ShellWord(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of(
                                          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789._/:,=+-@%") == std::string::npos;
  if (plain) return word;
  std::string out = "'";
  for (const char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// "--flag value" (a switch: "--flag"; a list: the flag once per item), as a value
// would be given on the command line.
std::string FlagText(const RunOption& option, const OptionValue& value) {
  const std::string flag = "--" + std::string(option.flag);
  if (const auto* list = std::get_if<std::vector<std::string>>(&value))
    return JoinText(*list, " ", [&](const std::string& item) { return flag + " " + ShellWord(item); });
  if (std::holds_alternative<bool>(value)) return flag;
  const std::string text = TomlValue(option, value);
  return flag + " " + (std::holds_alternative<std::string>(value) ? ShellWord(std::get<std::string>(value)) : text);
}

// The given flags of `settings`, in the table's order, as a command line; and the
// options among them that a scenario leaves out, or cannot hold.
struct GivenOptions {
  std::string command_line = "dtlab train";
  std::vector<std::string> left_out;     // process-only: "--threads 2"
  std::vector<std::string> cannot_hold;  // "--lr-schedule"
  std::set<const RunOption*> written;    // options whose value the file holds
};

GivenOptions SortGivenOptions(const RunSettings& settings) {
  GivenOptions given;
  for (const RunOption& option : RunOptionTable()) {
    if (option.flag.empty() || !settings.Given(option.flag)) continue;
    const bool held = !FileKey(option).empty() && option.read;
    if (!held && !(option.process_only && option.read)) {
      given.cannot_hold.push_back("--" + std::string(option.flag));
      continue;
    }
    const std::optional<OptionValue> value = option.read(settings);
    if (!value) continue;
    const std::string text = FlagText(option, *value);
    given.command_line += " " + text;
    if (held)
      given.written.insert(&option);
    else
      given.left_out.push_back(text);
  }
  // A [model] table needs its name: written beside any other model key (--precision).
  if (std::any_of(given.written.begin(), given.written.end(),
                  [](const RunOption* option) { return option->key.starts_with("model."); }))
    given.written.insert(FindRunOptionByKey("model.name"));
  return given;
}

// The file: a comment, the scenario's head, each written option under its
// section in the file format's order, and the check.
std::string Render(const RunSettings& settings, const GivenOptions& given) {
  std::map<std::string, std::string, std::less<>> values;  // "cluster.replicas" -> "4"
  for (const RunOption* option : given.written)
    if (const std::optional<OptionValue> value = option->read(settings))
      values[std::string(FileKey(*option))] = TomlValue(*option, *value);
  std::string text = "# Written by dtlab train --save-scenario: `dtlab run` on this file trains the run of\n#   " +
                     EscapeControl(given.command_line) +
                     "\n# (docs/scenarios.md, \"From a command line to a scenario file\").\n";
  if (!given.left_out.empty())
    text += "# Not part of the scenario (how the process runs, not what it computes): " +
            EscapeControl(JoinText(given.left_out, ", ")) + "\n";
  text += "\ntitle = " + TomlString(given.command_line) + "\n";
  text +=
      "headline = \"{{steps}} steps on {{replicas}} replicas: final loss {{final_loss}}, test accuracy "
      "{{test_accuracy}}\"\n";
  text += "description = \"The run of a dtlab train command line, saved with --save-scenario.\"\n";
  for (const RunOptionSection& section : RunOptionSections()) {
    std::string lines;
    for (const std::string_view key : section.keys)
      if (auto it = values.find(std::string(section.name) + "." + std::string(key)); it != values.end())
        lines += std::string(key) + " = " + it->second + "\n";
    // [run] is always there: its presence makes the file's base run "main".
    if (!lines.empty() || section.name == "run") text += "\n[" + std::string(section.name) + "]\n" + lines;
  }
  if (settings.config.cluster.check_reference)
    text += "\n[[check]]\nkind = \"reference\"\nexpect = \"pass\"\n";
  else
    text +=
        "\n[[check]]\nkind = \"value\"\nlabel = \"the run trains\"\nvalue = \"steps\"\nmin = 1\nexpect = \"pass\"\n";
  return text;
}

// A file's integers are bounded by the option's [min, max]; the command line's may
// reach further (a seed up to 2^64 - 1), and such a value has no file to go in.
Status CheckFileRanges(const RunSettings& settings, const GivenOptions& given) {
  for (const RunOption* option : given.written) {
    const RunOption& in_file = *FindRunOptionByKey(FileKey(*option));
    const std::optional<OptionValue> value = option->read(settings);
    if (!value || !(std::holds_alternative<std::int64_t>(*value) || std::holds_alternative<std::uint64_t>(*value)))
      continue;
    const auto* as_unsigned = std::get_if<std::uint64_t>(&*value);
    const bool above = as_unsigned ? *as_unsigned > static_cast<std::uint64_t>(in_file.max)
                                   : std::get<std::int64_t>(*value) > in_file.max;
    const bool below = !as_unsigned && std::get<std::int64_t>(*value) < in_file.min;
    if (above || below)
      return Status::InvalidArgument("--save-scenario: " + FlagText(*option, *value) +
                                     " is outside what a scenario file's " + std::string(in_file.key) + " holds (" +
                                     std::to_string(in_file.min) + " to " + std::to_string(in_file.max) + ")");
  }
  return Status::Ok();
}

}  // namespace

RunSettings SettingsOfScenarioRun(const ScenarioRun& run) {
  RunSettings settings;
  settings.config = run.config;
  settings.data = run.data;
  return settings;
}

StatusOr<std::string> ScenarioFileText(const RunSettings& settings, const std::string& path) {
  GivenOptions given = SortGivenOptions(settings);
  if (!given.cannot_hold.empty())
    return Status::InvalidArgument("--save-scenario: a scenario file has no key for " +
                                   JoinText(given.cannot_hold, ", ") +
                                   " (docs/scenarios.md, \"From a command line to a scenario file\"); leave " +
                                   (given.cannot_hold.size() == 1 ? "it" : "them") + " out to save this run");
  // The options whose value in the file's run differs from the command line's.
  auto differences = [&](const std::string& text) -> StatusOr<std::vector<const RunOption*>> {
    StatusOr<Scenario> scenario = ParseScenario(text, path);
    if (!scenario.ok())  // e.g. a --dataset path that is not UTF-8, which TOML cannot hold
      return Status::InvalidArgument("--save-scenario: the scenario file would not load: " +
                                     scenario.status().message());
    const RunSettings from_file = SettingsOfScenarioRun(scenario->runs.front());
    std::vector<const RunOption*> differ;
    for (const RunOption& option : RunOptionTable()) {
      if (option.flag.empty() || FileKey(option).empty() || !option.read) continue;
      const RunOption* in_file = FindRunOptionByKey(FileKey(option));
      if (!in_file || !in_file->read || option.read(settings) != in_file->read(from_file)) differ.push_back(&option);
    }
    return differ;
  };
  // Besides the given options, those whose command-line default differs from a
  // file's (10 epochs against 1; mirrored for more than one replica): found
  // against a file that sets nothing, since the given ones alone may not make a
  // valid file (4 replicas on one_device).
  GivenOptions defaults = given;
  defaults.written.clear();
  DTLAB_ASSIGN_OR_RETURN(const std::vector<const RunOption*> from_defaults, differences(Render(settings, defaults)));
  given.written.insert(from_defaults.begin(), from_defaults.end());
  // Then read the text back until the file holds the run (one round unless
  // writing one option changes another's dependent default).
  for (;;) {
    DTLAB_RETURN_IF_ERROR(CheckFileRanges(settings, given));
    const std::string text = Render(settings, given);
    DTLAB_ASSIGN_OR_RETURN(const std::vector<const RunOption*> differ, differences(text));
    if (differ.empty()) return text;
    bool added = false;
    for (const RunOption* option : differ) added |= given.written.insert(option).second;
    if (!added)
      return Status::Runtime("--save-scenario: the scenario file would not hold --" +
                             std::string(differ.front()->flag) + "'s value (a bug: report it with the command line)");
  }
}

Status SaveScenarioFile(const RunSettings& settings, const std::string& path) {
  // Refused before anything is computed: a directory, a device..., or a missing folder.
  DTLAB_ASSIGN_OR_RETURN(const std::string target, ResolveOutputPath(path, "scenario file"));
  const std::filesystem::path folder = std::filesystem::path(target).parent_path();
  std::error_code error;
  if (!folder.empty() && !std::filesystem::is_directory(folder, error))
    return Status::InvalidArgument("cannot write the scenario file " + path + ": the folder " + folder.string() +
                                   " does not exist");
  DTLAB_ASSIGN_OR_RETURN(const std::string text, ScenarioFileText(settings, path));
  return WriteFileAtomically(path, text);
}

}  // namespace dtlab
