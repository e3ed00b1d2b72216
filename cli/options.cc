#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <thread>
#include <typeinfo>

#include <nlohmann/json.hpp>
#include <tbb/global_control.h>

#include "core/text.h"

#include "cli/command.h"
#include "cli/man_page.h"
#include "core/checked_number.h"

namespace dtlab::cli {

namespace po = boost::program_options;

namespace {

// Boost's default style without allow_guessing: an abbreviation is an unknown option.
constexpr int kCommandLineStyle = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;

po::options_description WithHelp(const po::options_description& options) {
  po::options_description all(options);
  all.add_options()("help,h", "show this help and exit");
  return all;
}

// Whether the option's value type is an unsigned integer (lexical_cast reads "-1"
// into one as 2^N-1 without complaint).
bool IsUnsigned(const po::value_semantic* semantic) {
  return dynamic_cast<const po::typed_value<unsigned long>*>(semantic) != nullptr ||
         dynamic_cast<const po::typed_value<unsigned long long>*>(semantic) != nullptr ||
         dynamic_cast<const po::typed_value<unsigned int>*>(semantic) != nullptr ||
         dynamic_cast<const po::typed_value<unsigned short>*>(semantic) != nullptr;
}

// Boost's what() replaces each %placeholder% of its template with the argument's
// text until none is left, so an argument that itself holds "%original_token%" or
// "%value%" makes it loop forever (found by fuzz/options_fuzz.cc). The arguments
// are defused first: each '%' in them becomes "%25", which forms no placeholder.
struct ErrorSubstitutions : po::error_with_option_name {
  static std::map<std::string, std::string>& Of(po::error_with_option_name& e) {
    return e.*(&ErrorSubstitutions::m_substitutions);
  }
};

std::string SafeWhat(po::error_with_option_name& e) {
  for (auto& [name, value] : ErrorSubstitutions::Of(e)) {
    std::string safe;
    for (const char c : value) safe += c == '%' ? std::string("%25") : std::string(1, c);
    value = std::move(safe);
  }
  return e.what();
}

std::string PositionalRule(const std::string& command, const po::positional_options_description* positional) {
  const unsigned n = positional != nullptr ? positional->max_total_count() : 0;
  if (n == 0) return "dtlab " + command + " takes no positional arguments";
  std::string names;
  for (unsigned i = 0; i < n && i < 4; ++i) names += (i ? ", " : "") + positional->name_for_position(i);
  return "dtlab " + command + " takes " + std::to_string(n) + " positional argument" + (n == 1 ? "" : "s") + " (" +
         names + ")";
}

}  // namespace

StatusOr<bool> ParseCommandLine(const std::string& command, const po::options_description& options,
                                const std::vector<std::string>& args, po::variables_map& values,
                                const po::positional_options_description* positional,
                                const po::options_description* hidden) {
  po::options_description all = WithHelp(options);
  if (hidden != nullptr) all.add(*hidden);
  try {
    // Positional arguments are named here, not by Boost, which ignores them
    // silently when a command declares none.
    po::parsed_options parsed = po::command_line_parser(args).options(all).style(kCommandLineStyle).run();
    unsigned position = 0;
    for (po::option& option : parsed.options) {
      if (!option.string_key.empty() || option.value.empty()) continue;
      const std::string& text = option.value.front();
      if (positional == nullptr || position >= positional->max_total_count())
        return Status::InvalidArgument("unexpected argument '" + text + "'; " + PositionalRule(command, positional));
      option.string_key = positional->name_for_position(position++);
    }
    for (const po::option& option : parsed.options) {
      const po::option_description* description = all.find_nothrow(option.string_key, false);
      if (description == nullptr || !IsUnsigned(description->semantic().get())) continue;
      for (const std::string& text : option.value) {
        const auto first = text.find_first_not_of(" \t");
        if (first != std::string::npos && text[first] == '-')
          return Status::InvalidArgument("--" + option.string_key + " must be 0 or more (an unsigned integer), got '" +
                                         text + "'");
      }
    }
    po::store(parsed, values);
    if (values.count("help")) return true;
    for (const auto& [name, value] : values) {
      const std::type_info& type = value.value().type();
      double number = 0;
      if (type == typeid(double))
        number = value.as<double>();
      else if (type == typeid(float))
        number = value.as<float>();
      else
        continue;
      if (Status finite = CheckFinite(number, "--" + name); !finite.ok()) return finite;
    }
    po::notify(values);
  } catch (po::error_with_option_name& e) {
    const std::string message = SafeWhat(e);
    if (dynamic_cast<const po::unknown_option*>(&e) != nullptr) {
      // A typo should name what was meant: the options this one abbreviates.
      std::string given = e.get_option_name();
      given.erase(0, given.find_first_not_of('-'));
      std::vector<std::string> meant;
      for (const auto& option : all.options())
        if (!given.empty() && option->long_name().starts_with(given)) meant.push_back("--" + option->long_name());
      const std::string hint = meant.empty() ? "" : "did you mean " + JoinText(meant, " or ") + "? ";
      return Status::InvalidArgument(message + " (" + hint +
                                     "options are spelled in full; abbreviations are not accepted)");
    }
    return Status::InvalidArgument(message);
  } catch (const po::error& e) {
    return Status::InvalidArgument(e.what());
  }
  return false;
}

namespace {
thread_local bool parse_only = false;
thread_local std::string parse_only_error;
}  // namespace

ParseOnlyScope::ParseOnlyScope() { parse_only = true, parse_only_error.clear(); }
ParseOnlyScope::~ParseOnlyScope() { parse_only = false; }
const std::string& ParseOnlyScope::last_error() { return parse_only_error; }

namespace {
thread_local bool man_page_mode = false;
thread_local std::string man_page;
}  // namespace

std::string ManPageOf(int (*command)(const std::vector<std::string>&)) {
  struct Reset {
    ~Reset() { man_page_mode = false; }
  } reset;
  man_page_mode = true, man_page.clear();
  command({"--help"});
  return std::move(man_page);
}

int ParseOptions(const std::string& command, const std::string& synopsis, const std::string& description,
                 const po::options_description& options, const std::vector<std::string>& args,
                 po::variables_map& values, const po::positional_options_description* positional,
                 const po::options_description* hidden, const std::string& examples) {
  auto parsed = ParseCommandLine(command, options, args, values, positional, hidden);
  if (parse_only) {
    parse_only_error = parsed.ok() ? "" : parsed.status().message();
    return parsed.ok() ? 0 : 2;
  }
  if (!parsed.ok()) {
    std::fprintf(stderr, "dtlab %s: %s\nRun 'dtlab %s --help' for the options.\n", command.c_str(),
                 parsed.status().message().c_str(), command.c_str());
    return 2;
  }
  if (*parsed) {
    std::ostringstream help;
    help << "Usage: dtlab " << command << " " << synopsis << "\n\n"
         << description << "\n\n"
         << WithHelp(options) << "\n"
         << "Options are spelled in full (no abbreviations); an argument that is not an option or one of\n"
            "the synopsis' positional arguments is refused (exit 2).\n";
    if (!examples.empty()) help << "\nExamples:\n" << examples;
    if (man_page_mode) {
      man_page = HelpToRoff("dtlab-" + command, FirstSentence(description), help.str());
      return 0;
    }
    std::cout << help.str();
    return 0;
  }
  return -1;
}

void PrintJson(const nlohmann::json& value) {
  const std::string text = value.dump(2, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
}

int ReportError(const std::string& command, const Status& status) {
  const std::string message = EscapeControl(status.ToString(), /*keep_line_breaks=*/true);
  std::fprintf(stderr, "dtlab %s: %s\n", command.c_str(), message.c_str());
  return ExitCodeFor(status);
}

bool ApplyThreadCount(int threads) {
  if (threads < 0) {
    std::fprintf(stderr, "dtlab: --threads must be 0 (all cores) or more, got %d\n", threads);
    return false;
  }
  // Results never depend on this number (see sim/compute/batch_runner.h); it only sets speed.
  static std::unique_ptr<tbb::global_control> control;
  const std::size_t n =
      threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : static_cast<std::size_t>(threads);
  control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, n);
  return true;
}

StatusOr<std::vector<int>> ParseDeviceList(const std::string& text) {
  std::vector<int> devices;
  if (text.empty()) return devices;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto device = ParseInteger<int>(item, "a GPU index", 0, std::numeric_limits<int>::max());
    if (!device.ok())
      return Status::InvalidArgument("--devices must list GPU indices like 0,1,2 (see dtlab devices), got '" + text +
                                     "': " + device.status().message());
    devices.push_back(*device);
  }
  return devices;
}

}  // namespace dtlab::cli
