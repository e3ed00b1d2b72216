#include <cstdio>
#include <iostream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <tbb/global_control.h>

#include "core/text.h"

#include "cli/command.h"

namespace dtlab::cli {

namespace po = boost::program_options;

int ParseOptions(const std::string& command, const std::string& synopsis, const std::string& description,
                 const po::options_description& options, const std::vector<std::string>& args,
                 po::variables_map& values, const po::positional_options_description* positional) {
  po::options_description all(options);
  all.add_options()("help,h", "show this help and exit");
  try {
    po::command_line_parser parser(args);
    parser.options(all);
    if (positional) parser.positional(*positional);
    po::store(parser.run(), values);
    if (values.count("help")) {
      std::cout << "Usage: dtlab " << command << " " << synopsis << "\n\n" << description << "\n\n" << all << "\n";
      return 0;
    }
    po::notify(values);
  } catch (const po::error& e) {
    std::fprintf(stderr, "dtlab %s: %s\nRun 'dtlab %s --help' for the options.\n", command.c_str(), e.what(),
                 command.c_str());
    return 2;
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
  // Results never depend on this number (see sim/batch_runner.h); it only sets speed.
  static std::unique_ptr<tbb::global_control> control;
  const std::size_t n = threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : static_cast<std::size_t>(threads);
  control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, n);
  return true;
}

StatusOr<std::vector<int>> ParseDeviceList(const std::string& text) {
  std::vector<int> devices;
  if (text.empty()) return devices;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      std::size_t used = 0;
      const int d = std::stoi(item, &used);
      if (used != item.size() || d < 0) throw std::invalid_argument(item);
      devices.push_back(d);
    } catch (const std::exception&) {
      return Status::InvalidArgument("--devices must list GPU indices like 0,1,2 (see dtlab devices), got '" + text +
                                     "'");
    }
  }
  return devices;
}

}  // namespace dtlab::cli
