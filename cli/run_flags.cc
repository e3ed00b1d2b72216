#include "cli/run_flags.h"

#include <cstdint>
#include <string>
#include <vector>

#include <boost/lexical_cast.hpp>

#include "cli/command.h"

namespace dtlab::cli {
namespace {

namespace po = boost::program_options;

// The option's value in its command-line type, with the table's default.
template <typename T>
po::typed_value<T>* Typed(const RunOption& option) {
  po::typed_value<T>* value = po::value<T>();
  if (!option.default_text.empty())
    value->default_value(boost::lexical_cast<T>(std::string(option.default_text)), std::string(option.default_text));
  return value;
}

// The stored value of `option` as an OptionValue.
OptionValue ValueOf(const RunOption& option, const po::variable_value& stored) {
  switch (option.type) {
    case OptionType::kSwitch:
      return true;
    case OptionType::kInt32:
      return std::int64_t{stored.as<std::int32_t>()};
    case OptionType::kInt64:
      return stored.as<std::int64_t>();
    case OptionType::kUint64:
      return stored.as<std::uint64_t>();
    case OptionType::kFloat:
      return static_cast<double>(stored.as<float>());
    case OptionType::kDouble:
      return stored.as<double>();
    case OptionType::kName:
    case OptionType::kText:
      return stored.as<std::string>();
    case OptionType::kTextList:
      return stored.as<std::vector<std::string>>();
  }
  return false;
}

}  // namespace

void AddRunFlag(po::options_description& options, const RunOption& option) {
  const std::string flag(option.flag), help(option.help);
  auto add = options.add_options();
  switch (option.type) {
    case OptionType::kSwitch:
      add(flag.c_str(), help.c_str());
      break;
    case OptionType::kInt32:
      add(flag.c_str(), Typed<std::int32_t>(option), help.c_str());
      break;
    case OptionType::kInt64:
      add(flag.c_str(), Typed<std::int64_t>(option), help.c_str());
      break;
    case OptionType::kUint64:
      add(flag.c_str(), Typed<std::uint64_t>(option), help.c_str());
      break;
    case OptionType::kFloat:
      add(flag.c_str(), Typed<float>(option), help.c_str());
      break;
    case OptionType::kDouble:
      add(flag.c_str(), Typed<double>(option), help.c_str());
      break;
    case OptionType::kName:
    case OptionType::kText:
      add(flag.c_str(), Typed<std::string>(option), help.c_str());
      break;
    case OptionType::kTextList:
      add(flag.c_str(), po::value<std::vector<std::string>>()->composing(), help.c_str());
      break;
  }
}

void AddRunFlags(po::options_description& options, const po::options_description* more_outputs) {
  // One captioned group per topic (Boost prints each under its caption), in
  // RunOptionGroups()' order; within a group, in the table's order.
  for (const RunOptionGroup& group : RunOptionGroups()) {
    po::options_description flags(std::string(group.title));
    for (const RunOption& option : RunOptionTable())
      if (!option.flag.empty() && option.group == group.group) AddRunFlag(flags, option);
    // The command's own outputs join this group option by option: adding the
    // description whole would print its caption as a second "Outputs:" heading.
    if (group.group == OptionGroup::kOutputs && more_outputs != nullptr)
      for (const auto& option : more_outputs->options()) flags.add(option);
    if (!flags.options().empty()) options.add(flags);
  }
}

Status ApplyRunFlags(const po::variables_map& values, RunSettings& settings) {
  for (const bool names : {false, true}) {
    for (const RunOption& option : RunOptionTable()) {
      if (option.flag.empty() || (option.type == OptionType::kName) != names) continue;
      const auto stored = values.find(std::string(option.flag));
      if (stored == values.end()) continue;
      OptionValue value = ValueOf(option, stored->second);
      if (const auto* text = std::get_if<std::string>(&value); text && text->empty() && option.default_text.empty())
        continue;
      if (!stored->second.defaulted()) settings.given.insert(std::string(option.flag));
      DTLAB_RETURN_IF_ERROR(option.apply(value, settings));
    }
  }
  return Status::Ok();
}

StatusOr<RunSettings> RunSettingsFromArguments(const std::vector<std::string>& args) {
  po::options_description options("Options");
  AddRunFlags(options);
  po::variables_map values;
  DTLAB_RETURN_IF_ERROR(ParseCommandLine("train", options, args, values).status());
  RunSettings settings;
  DTLAB_RETURN_IF_ERROR(ApplyRunFlags(values, settings));
  ApplyDependentDefaults(settings, OptionSource::kCommandLine);
  return settings;
}

}  // namespace dtlab::cli
