// The dtlab command's subcommands. Each takes its arguments (after the subcommand
// name) and returns the process exit code (docs/architecture.md, "The command": 0 ok, 1 a check failed,
// 2 usage or input error, 3 runtime fault). Commands parse options and call the
// library; they compute nothing themselves.
#pragma once

#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace dtlab::cli {

int TrainCommand(const std::vector<std::string>& args);
int EvalCommand(const std::vector<std::string>& args);
int CheckCommand(const std::vector<std::string>& args);
int RunCommand(const std::vector<std::string>& args);
int ListCommand(const std::vector<std::string>& args);
int LessonCommand(const std::vector<std::string>& args);
int ClusterCommand(const std::vector<std::string>& args);
int ReplayCommand(const std::vector<std::string>& args);
int DevicesCommand(const std::vector<std::string>& args);

/// The common command-line rules, as a library function: parses `args` against
/// `options` (plus --help, and `hidden` options that --help does not list) into
/// `values`, and never prints or exits. Rules (docs/reliability.md, "Arguments"):
///   - options are spelled in full: no prefix guessing (--epoch is not --epochs);
///   - positional arguments fill `positional`'s names in order; any other is refused
///     ("unexpected argument 'x'; dtlab train takes no positional arguments");
///   - an unsigned option refuses a negative value (Boost would wrap -1 to 2^64-1);
///   - a floating-point option refuses nan and inf.
/// Returns true when --help was given (values not notified), false after storing
/// and notifying the values, or InvalidArgument with the usage error.
StatusOr<bool> ParseCommandLine(const std::string& command, const boost::program_options::options_description& options,
                                const std::vector<std::string>& args, boost::program_options::variables_map& values,
                                const boost::program_options::positional_options_description* positional = nullptr,
                                const boost::program_options::options_description* hidden = nullptr);

/// ParseCommandLine, then what a command prints: returns -1 on success, or the exit
/// code to return (0 after printing --help, 2 after printing a usage error naming
/// the command). --help prints the synopsis, the description, the options (by
/// group, where `options` holds captioned groups) and then `examples`, if any:
/// lines of two-space-indented prose, each followed by four-space-indented commands.
int ParseOptions(const std::string& command, const std::string& synopsis, const std::string& description,
                 const boost::program_options::options_description& options, const std::vector<std::string>& args,
                 boost::program_options::variables_map& values,
                 const boost::program_options::positional_options_description* positional = nullptr,
                 const boost::program_options::options_description* hidden = nullptr, const std::string& examples = "");

/// The manual page (roff, cli/man_page.h) of `command`: its --help text, turned into
/// a page instead of printed; empty if the command printed no help. How
/// `dtlab --man-page DIR` writes the pages the build installs.
std::string ManPageOf(int (*command)(const std::vector<std::string>&));

/// For tests and fuzzing (fuzz/options_fuzz.cc): while one is alive, ParseOptions on
/// this thread parses with the command's real option table and returns 0 (parsed,
/// or --help) or 2 (usage error) without printing, so the command returns right
/// after parsing and runs nothing.
class ParseOnlyScope {
 public:
  ParseOnlyScope();
  ~ParseOnlyScope();
  ParseOnlyScope(const ParseOnlyScope&) = delete;
  ParseOnlyScope& operator=(const ParseOnlyScope&) = delete;
  /// The usage error of the last ParseOptions in this scope, or empty.
  static const std::string& last_error();
};

/// Parses --devices: GPU indices separated by commas ("0,1"); empty text gives none.
StatusOr<std::vector<int>> ParseDeviceList(const std::string& text);

/// Prints `value` on stdout, indented by 2, then a newline. Text that is not UTF-8
/// (a path given as bytes, say) shows as U+FFFD instead of aborting the dump.
void PrintJson(const nlohmann::json& value);

/// Prints "dtlab <command>: <status>" on stderr, control characters escaped
/// (EscapeControl: the message may quote a file), and returns its exit code.
int ReportError(const std::string& command, const Status& status);

/// Applies --threads (0: all cores) for the rest of the process. Returns false
/// (after printing an error) for a negative value.
bool ApplyThreadCount(int threads);

}  // namespace dtlab::cli
