// Fuzzes the scenario file reader (scenarios/scenario.h): any bytes give a Scenario
// or an InvalidArgument naming the file, never a crash. The same bytes are also
// tried as a --set override on a valid scenario (ApplySet's key and value parsing),
// and as the name of a variant that another resumes from.
//
// Every scenario that parses must keep its outputs inside the run directory: each
// checkpoint directory RunScenario would create (CheckpointDirectories) and each
// TensorBoard folder (RunDirectory) is a direct child of its parent, named after
// its run; anything else aborts, which libFuzzer reports as a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "scenarios/scenario.h"
#include "scenarios/scenario_runner.h"

namespace {
constexpr const char* kValid = R"(title = "t"
[cluster]
strategy = "mirrored"
replicas = 2
[data]
source = "synthetic"
global_batch = 4
[run]
steps = 1
[[variant]]
name = "v"
set = ["loss.denominator=default"]
[[check]]
kind = "reference"
expect = "pass"
)";

[[noreturn]] void Escape(const std::string& what, const std::string& path) {
  std::fprintf(stderr, "scenario_fuzz: %s escapes its run directory: %s\n", what.c_str(), path.c_str());
  std::abort();
}

// `path` must be `parent`/`name` exactly, with no "." or ".." to walk out.
void ExpectDirectlyUnder(const std::string& parent, const std::string& name, const std::string& path) {
  const std::filesystem::path normal = std::filesystem::path(path).lexically_normal();
  if (normal.parent_path() != std::filesystem::path(parent) || normal.filename() != name || name == "." ||
      name == ".." || name.empty())
    Escape("run '" + name + "'", path);
}

void CheckOutputsStayUnder(const dtlab::Scenario& scenario) {
  const std::string work = "/run-directory";
  const auto directories = dtlab::CheckpointDirectories(scenario, work);
  if (!directories.ok()) Escape("a parsed scenario's run names are refused by the runner", scenario.path);
  for (const auto& [name, path] : *directories) ExpectDirectlyUnder(work, name, path);
  for (const auto& run : scenario.runs) {
    const auto tensorboard = dtlab::RunDirectory("/tensorboard", run.name);
    if (!tensorboard.ok()) Escape("run '" + run.name + "' (refused by RunDirectory after parsing)", run.name);
    ExpectDirectlyUnder("/tensorboard", run.name, *tensorboard);
  }
}

void ParseAndCheck(const std::string& text, const std::string& path, const std::vector<std::string>& sets = {}) {
  const auto scenario = dtlab::ParseScenario(text, path, sets);
  if (scenario.ok()) CheckOutputsStayUnder(*scenario);
}

std::string TomlString(const std::string& text) {
  std::string quoted = "\"";
  for (const char c : text) {
    char escaped[8];
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned char>(c));
      quoted += escaped;
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ParseAndCheck(text, "fuzz.toml");
  ParseAndCheck(kValid, "valid.toml", {text});
  // The bytes as a run name, resumed from: the path-traversal case.
  ParseAndCheck(std::string(kValid) + "[[variant]]\nname = " + TomlString(text) + "\nresume_from = \"v\"\n",
                "named.toml");
  return 0;
}
