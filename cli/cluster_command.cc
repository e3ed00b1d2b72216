// dtlab cluster: reads a TF_CONFIG (the environment variable, or --tf-config),
// validates it with TensorFlow's rules and shows how its tasks map onto ranks,
// which task is the chief and why; with --world-size and --rank, checks it against
// an MPI-like world (sim/comm/tf_config.h, docs/tf_config.md).
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "sim/comm/tf_config.h"

namespace dtlab::cli {
namespace {

namespace po = boost::program_options;

constexpr const char* kDescription =
    R"(Shows how a TF_CONFIG maps the tasks of a TensorFlow cluster onto ranks, which task is the
chief and why, and checks it for the mistakes TensorFlow would reject, saying what to fix.

TF_CONFIG is the JSON environment variable that MultiWorkerMirroredStrategy and
ParameterServerStrategy read on every machine of a cluster: the same "cluster" everywhere
(every task's "host:port", by job: chief, worker, ps, evaluator), and a "task" saying which
one this machine is. For the first of two workers:

  export TF_CONFIG='{"cluster": {"worker": ["host1:2222", "host2:2222"]},
                     "task": {"type": "worker", "index": 0}}'
  dtlab cluster

The tasks that train (chief and workers) are ranks: the chief is rank 0, then the workers
in index order. Without a "chief" job, worker 0 is the chief. ps and evaluator tasks have
no rank. With --world-size N --rank R, also checks that this TF_CONFIG belongs to process R
of a world of N processes (as under mpirun -np N).

Exit 0 when the config is valid (and fits the world), 2 when it is not.
The rules, with their TensorFlow sources: docs/tf_config.md.)";

nlohmann::json OrNull(const std::string& text) { return text.empty() ? nlohmann::json() : nlohmann::json(text); }

nlohmann::json ToJson(const TfConfig& config) {
  nlohmann::json tasks = nlohmann::json::array();
  std::string address, chief_address;
  for (const TfTask& t : config.Tasks()) {
    if (t.is_this_task) address = t.address;
    if (t.rank == 0) chief_address = t.address;
    tasks.push_back({{"rank", t.rank >= 0 ? nlohmann::json(t.rank) : nlohmann::json()},
                     {"type", t.type},
                     {"index", t.index},
                     {"address", OrNull(t.address)},
                     {"role", t.role},
                     {"this_task", t.is_this_task}});
  }
  const bool chief_job = config.HasChiefJob();
  return {{"num_workers", config.NumWorkers()},
          {"task",
           {{"type", config.task_type},
            {"index", config.task_index},
            {"address", OrNull(address)},
            {"rank", config.WorkerRank() >= 0 ? nlohmann::json(config.WorkerRank()) : nlohmann::json()},
            {"is_chief", config.IsChief()}}},
          {"chief",
           {{"type", chief_job ? "chief" : "worker"},
            {"index", 0},
            {"address", chief_address},
            {"description", config.ChiefDescription()}}},
          {"tasks", std::move(tasks)},
          {"rpc_layer", OrNull(config.rpc_layer)},
          {"environment", OrNull(config.environment)},
          {"ignored_keys", config.ignored_keys}};
}

}  // namespace

int ClusterCommand(const std::vector<std::string>& args) {
  std::string text;
  int world_size = 0, rank = 0;
  po::options_description options("Options");
  options.add_options()("tf-config", po::value(&text),
                        "the TF_CONFIG JSON to read (default: the TF_CONFIG environment variable)")(
      "world-size", po::value(&world_size), "check against a world of this many processes (with --rank)")(
      "rank", po::value(&rank), "this process's rank in that world, 0 to world size - 1 (with --world-size)")(
      "json", "print a JSON summary on stdout instead of the table");
  po::variables_map values;
  const int parsed = ParseOptions(
      "cluster", "[--tf-config JSON] [--world-size N --rank R] [--json]", kDescription, options, args, values, nullptr,
      nullptr,
      "  Which task is the chief of a two-worker cluster, and is rank 1 of 2 right for worker 1?\n"
      "    dtlab cluster --tf-config '{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"]}, \"task\": {\"type\": "
      "\"worker\", \"index\": 1}}' --world-size 2 --rank 1\n");
  if (parsed >= 0) return parsed;
  if (values.count("world-size") != values.count("rank")) {
    std::fputs(
        "dtlab cluster: --world-size and --rank go together: give both (e.g. --world-size 4 --rank 0), or "
        "neither\n",
        stderr);
    return 2;
  }
  if (!values.count("tf-config")) {
    const char* env = std::getenv("TF_CONFIG");
    if (env == nullptr) {
      std::fputs(
          "dtlab cluster: TF_CONFIG is not set. Set it to the cluster's JSON, e.g.\n"
          "  export TF_CONFIG='{\"cluster\": {\"worker\": [\"host1:2222\", \"host2:2222\"]}, "
          "\"task\": {\"type\": \"worker\", \"index\": 0}}'\n"
          "or pass it as --tf-config JSON. See 'dtlab cluster --help'.\n",
          stderr);
      return 2;
    }
    text = env;
  }
  auto config = ParseTfConfig(text);
  if (!config.ok()) return ReportError("cluster", config.status());

  // The world check comes after the description, which helps to see why it failed.
  const bool check_world = values.count("world-size") > 0;
  const Status world = check_world ? CheckTfConfigAgainstWorld(*config, world_size, rank) : Status::Ok();
  if (values.count("json")) {
    nlohmann::json out = ToJson(*config);
    if (check_world) {
      out["world"] = {{"size", world_size}, {"rank", rank}, {"fits", world.ok()}};
      if (!world.ok()) out["world"]["error"] = world.message();
    }
    PrintJson(out);
  } else {
    std::fputs(DescribeTfConfig(*config).c_str(), stdout);
    if (check_world && world.ok())
      std::printf("World: rank %d of %d processes is %s, as TF_CONFIG says.\n", rank, world_size,
                  config->TaskName().c_str());
  }
  std::fflush(stdout);
  if (!world.ok()) return ReportError("cluster", world);
  return 0;
}

}  // namespace dtlab::cli
