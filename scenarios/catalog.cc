#include "scenarios/catalog.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/text.h"
#include "scenarios/scenario.h"

namespace dtlab {
namespace {

std::string FromEnvironment(const char* variable, const std::string& fallback) {
  const char* value = std::getenv(variable);
  return value && *value ? value : fallback;
}

}  // namespace

std::string ScenariosDirectory() { return FromEnvironment("DTLAB_SCENARIOS_DIR", DTLAB_SOURCE_DIR "/scenarios"); }
std::string LessonsDirectory() { return FromEnvironment("DTLAB_LESSONS_DIR", DTLAB_SOURCE_DIR "/lessons"); }

StatusOr<std::string> ResolveScenarioPath(const std::string& name_or_path) {
  std::error_code ec;
  // A path that exists goes to the reader even when it is not a regular file, so
  // that a FIFO or a device is named as such ("is a FIFO, not a regular file").
  if (name_or_path.ends_with(".toml") || name_or_path.find('/') != std::string::npos) {
    if (std::filesystem::exists(name_or_path, ec)) return name_or_path;
  } else if (std::filesystem::is_regular_file(name_or_path, ec)) {
    return name_or_path;
  }
  std::string name = name_or_path;
  if (name.size() > 5 && name.ends_with(".toml")) name.resize(name.size() - 5);
  const std::string builtin = ScenariosDirectory() + "/" + name + ".toml";
  if (name.find('/') == std::string::npos && std::filesystem::is_regular_file(builtin, ec)) return builtin;
  const std::string names =
      JoinText(ListBuiltinScenarios(), ", ", [](const CatalogEntry& entry) { return entry.name; });
  return Status::NotFound("no scenario file or built-in scenario '" + name_or_path + "'; built-in scenarios: " + names +
                          " (dtlab list shows them with their descriptions)");
}

std::vector<CatalogEntry> ListBuiltinScenarios() {
  std::vector<CatalogEntry> entries;
  std::error_code ec;
  // The error_code overloads throughout: an unreadable entry ends the listing, it
  // never throws (operator++ of a range-for would).
  for (std::filesystem::directory_iterator it(ScenariosDirectory(), ec), end; !ec && it != end; it.increment(ec)) {
    const std::filesystem::directory_entry& file = *it;
    if (file.path().extension() != ".toml") continue;
    CatalogEntry entry;
    entry.path = file.path().string();
    entry.name = file.path().stem().string();
    auto scenario = LoadScenario(entry.path);
    if (scenario.ok()) {
      entry.title = scenario->title;
      entry.description = scenario->description;
    } else {
      entry.error = scenario.status().message();
    }
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end(), [](const CatalogEntry& a, const CatalogEntry& b) {
    if ((a.name == "flagship") != (b.name == "flagship")) return a.name == "flagship";
    return a.name < b.name;
  });
  return entries;
}

}  // namespace dtlab
