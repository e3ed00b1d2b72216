// dtlab check: RapidCheck properties of loss scaling (sim/check/loss_check.h, docs/check.md).
#include <chrono>
#include <iostream>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "sim/check/loss_check.h"

namespace dtlab::cli {

namespace po = boost::program_options;

int CheckCommand(const std::vector<std::string>& args) {
  CheckOptions options;
  std::string property;
  po::options_description visible("Options");
  visible.add_options()("trials", po::value(&options.trials)->default_value(options.trials),
                        "random cases per property")(
      "seed", po::value(&options.seed), "RapidCheck seed (default: random; printed, so a failure can be replayed)")(
      "max-replicas", po::value(&options.max_replicas)->default_value(options.max_replicas),
      "largest replica count drawn (1 to 1024)")("list", "list the built-in properties and exit")(
      "json", "print one JSON summary on stdout");
  po::options_description hidden;
  hidden.add_options()("property", po::value(&property));
  po::positional_options_description positional;
  positional.add("property", 1);
  po::variables_map values;
  std::string names;
  for (const auto& p : BuiltinProperties()) names += "  " + p.name + ": " + p.description + "\n";
  const int parsed =
      ParseOptions("check", "[PROPERTY] [options]",
                   "Runs RapidCheck properties of loss scaling over random clusters (replicas, workers), global\n"
                   "batches (short and empty replicas), rebatch rules, sample weights, per-pixel losses and\n"
                   "regularization. A correct property must pass; a pitfall property must fail, and its shrunk\n"
                   "counterexample is printed in words. Exit 0 when every property behaves as expected, 1 if\n"
                   "not. Without PROPERTY, runs them all.\n\nProperties:\n" +
                       names.substr(0, names.size() - 1),
                   visible, args, values, &positional, &hidden,
                   "  Every property, 100 random cases each:\n"
                   "    dtlab check\n"
                   "  One property, more cases, with a fixed seed (a failure prints the seed that replays it):\n"
                   "    dtlab check correct-scaling --trials 1000 --seed 42\n");
  if (parsed >= 0) return parsed;
  if (values.count("list")) {
    if (values.count("json")) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& p : BuiltinProperties())
        list.push_back({{"name", p.name}, {"description", p.description}, {"expect", p.expect_pass ? "pass" : "fail"}});
      PrintJson(list);
    } else {
      std::fputs(names.c_str(), stdout);
    }
    return 0;
  }
  if (options.trials < 1) return ReportError("check", Status::InvalidArgument("--trials must be at least 1"));
  if (options.max_replicas < 1 || options.max_replicas > 1024)
    return ReportError("check", Status::InvalidArgument("--max-replicas must be in [1, 1024], got " +
                                                        std::to_string(options.max_replicas)));
  if (!values.count("seed")) options.seed = std::random_device()() | (std::uint64_t{std::random_device()()} << 32);

  std::vector<const BuiltinProperty*> chosen;
  for (const auto& p : BuiltinProperties())
    if (property.empty() || p.name == property) chosen.push_back(&p);
  if (chosen.empty())
    return ReportError("check",
                       Status::InvalidArgument("unknown property '" + property + "'; the properties are:\n" + names));

  const bool json = values.count("json") > 0;
  std::FILE* human = json ? stderr : stdout;
  nlohmann::json out = {{"seed", options.seed}, {"trials", options.trials}, {"properties", nlohmann::json::array()}};
  bool all_as_expected = true;
  for (const BuiltinProperty* p : chosen) {
    const auto start = std::chrono::steady_clock::now();
    const CheckResult r = p->run(options);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool as_expected = r.error.empty() && r.passed == p->expect_pass;
    all_as_expected &= as_expected;
    std::string verdict;
    if (!r.error.empty())
      verdict = "ERROR: " + r.error;
    else if (r.passed && p->expect_pass)
      verdict = "PASS (" + std::to_string(r.trials) + " cases)";
    else if (!r.passed && !p->expect_pass)
      verdict = "CAUGHT, the pitfall fails as it should after " + std::to_string(r.trials) +
                " passing cases; minimal counterexample:\n    " + r.counterexample;
    else if (r.passed)
      verdict = "NOT CAUGHT: the pitfall passed " + std::to_string(r.trials) + " cases";
    else
      verdict =
          "FAIL after " + std::to_string(r.trials) + " passing cases; minimal counterexample:\n    " + r.counterexample;
    std::fprintf(human, "%-24s %s  [%.1f s]\n", p->name.c_str(), verdict.c_str(), seconds);
    std::fflush(human);
    nlohmann::json entry = {{"name", p->name},    {"expect", p->expect_pass ? "pass" : "fail"},
                            {"passed", r.passed}, {"as_expected", as_expected},
                            {"cases", r.trials},  {"seconds", seconds}};
    if (!r.counterexample.empty()) entry["counterexample"] = r.counterexample;
    if (!r.error.empty()) entry["error"] = r.error;
    out["properties"].push_back(std::move(entry));
  }
  out["all_as_expected"] = all_as_expected;
  std::fprintf(human, "%s; seed %llu (replay with --seed %llu)\n",
               all_as_expected ? "Every property behaved as expected" : "Some property did not behave as expected",
               static_cast<unsigned long long>(options.seed), static_cast<unsigned long long>(options.seed));
  if (json) PrintJson(out);
  return all_as_expected ? 0 : 1;
}

}  // namespace dtlab::cli
