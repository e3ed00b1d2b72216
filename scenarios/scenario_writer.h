// Scenario files written from a run's settings: `dtlab train --save-scenario FILE`
// turns a command line into the scenario file that `dtlab run FILE` trains the
// same way (every run is a scenario; docs/scenarios.md, "From a command line to a
// scenario file").
//
// The file is written through the run option table (scenarios/run_options.h), with
// no code for any one option: every given option that a scenario file holds (its
// key, or its file_key: --dataset is data.source) is written as its key; every
// other option whose value differs from what a scenario file gets without it
// (the command line's 10 epochs against a file's 1, mirrored for more than one
// replica) is written too. The text is then read back as a scenario and each
// option compared with the command line's value, so a file that would train
// another run is never written. Process-only options (--threads, --json, the
// compute backend) are listed in a comment; any other given option a scenario
// cannot hold (--lr-schedule, --checkpoint-dir, ...) is refused, never dropped.
//
// Thread safety: the functions are reentrant.
#pragma once

#include <string>

#include "core/status.h"
#include "scenarios/run_options.h"
#include "scenarios/scenario.h"

namespace dtlab {

/// The settings a scenario run trains with: its config and data; the process's
/// own options (threads, backend, json...) keep their defaults.
RunSettings SettingsOfScenarioRun(const ScenarioRun& run);

/// The scenario file equivalent to the command line's run `settings` (filled by
/// the flags, ApplyDependentDefaults(kCommandLine) applied): a comment naming the
/// command line and the options it leaves out, a title (the command line), a
/// headline, the run's keys in the file format's order, and one check (the
/// reference check with --check-reference, else that the run trains). `path`
/// names the file in messages. InvalidArgument naming each given option a
/// scenario cannot hold, or what the scenario loader refuses in the written text
/// (e.g. a seed above a file's range); Runtime if the text read back would train
/// another run (a bug in the table: an option's read and apply disagree).
StatusOr<std::string> ScenarioFileText(const RunSettings& settings, const std::string& path);

/// ScenarioFileText, written to `path` atomically (core/file_io.h: temp file in the
/// same folder, then rename; never a half-written file). InvalidArgument when
/// `path` is a directory (or another thing that is not a file) or its folder does
/// not exist; IOError when the system refuses the write.
Status SaveScenarioFile(const RunSettings& settings, const std::string& path);

}  // namespace dtlab
