// `dtlab train`'s flags, read from the run option table (scenarios/run_options.h):
// the table gives each flag its value type, default and help text, and stores
// the parsed values into the same RunSettings a scenario file fills.
#pragma once

#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "core/status.h"
#include "scenarios/run_options.h"

namespace dtlab::cli {

/// Adds every run option that has a flag to `options`, as one captioned group per
/// topic (RunOptionGroups(): --help prints "Model and data:", then its options in
/// the table's order, ...): a switch takes no value, a list is repeatable, and an
/// option with a default shows it in --help ("--epochs arg (=10)"). `more_outputs`,
/// if given, joins the Outputs group (dtlab train's --save-scenario).
void AddRunFlags(boost::program_options::options_description& options,
                 const boost::program_options::options_description* more_outputs = nullptr);

/// Adds one run option (REQUIRES: it has a flag) to `options`: for a command that
/// shares it with dtlab train (--threads).
void AddRunFlag(boost::program_options::options_description& options, const RunOption& option);

/// Stores the run options in `values` (parsed against AddRunFlags' options) into
/// `settings` through each option's apply, defaults included, and records in
/// settings.given the flags given. An empty value of an option without a default
/// counts as not given. Names are applied after the other options, so that a bad
/// schedule or fault spec is reported before a bad name. Returns the first error.
Status ApplyRunFlags(const boost::program_options::variables_map& values, RunSettings& settings);

/// The run dtlab train's arguments describe, read as the command reads them
/// (ParseCommandLine against AddRunFlags, ApplyRunFlags, then
/// ApplyDependentDefaults for the command line), without its checks of the run
/// (TrainConfig::Validate) or of the process (threads, MPI): for tests and tools.
/// InvalidArgument with the usage error or the first bad value.
StatusOr<RunSettings> RunSettingsFromArguments(const std::vector<std::string>& args);

}  // namespace dtlab::cli
