#include "sim/comm/tf_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/text.h"

namespace dtlab {

namespace {

using nlohmann::json;

// TensorFlow's own example (tfconfig_cluster_resolver.py docstring), quoted in
// errors so that the fix is one copy away.
constexpr std::string_view kExample =
    R"({"cluster": {"worker": ["localhost:12345", "localhost:23456"]}, "task": {"type": "worker", "index": 0}})";

// multi_worker_util._validate_cluster_spec: allowed_task_types.
constexpr std::string_view kJobs[] = {"chief", "worker", "ps", "evaluator"};
constexpr std::string_view kJobList = R"("chief", "worker", "ps" and "evaluator")";

// Keys TensorFlow reads: cluster and task (TFConfigClusterResolver), rpc_layer and
// session_master (its rpc_layer and master()), environment (the Estimator's
// train_and_evaluate, tensorflow_estimator/python/estimator/training.py).
constexpr std::string_view kKnownKeys[] = {"cluster", "task", "rpc_layer", "environment", "session_master"};
constexpr std::string_view kKnownTaskKeys[] = {"type", "index"};

// Concatenation by appending: GCC 12 gives false -Wrestrict warnings on chains of
// `"literal" + std::string`.
template <typename... Parts>
std::string Cat(const Parts&... parts) {
  std::string out;
  (out.append(std::string_view(parts)), ...);
  return out;
}

constexpr int kMaxTfConfigDepth = 8;

std::string Num(long long value) { return std::to_string(value); }

bool Contains(const auto& range, std::string_view item) {
  return std::find(std::begin(range), std::end(range), item) != std::end(range);
}

// A string quoted, its control characters escaped (EscapeControl), cut to a
// readable length: the value comes from the user and may be long or hostile.
std::string Quote(std::string_view text) { return Cat("\"", Printable(text), "\""); }

// User text for the description: as is when it prints cleanly, else quoted, so
// that a control character in an address cannot garble the terminal.
std::string Shown(std::string_view text) { return IsTerminalSafe(text) ? std::string(text) : Quote(text); }

// What a JSON value is, for "expected X, got Y" messages: its kind, and its value
// when that is short (never the dump of a large list or object).
std::string Kind(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "a list";
    case json::value_t::string:
      return Cat("a string (", Quote(value.get_ref<const std::string&>()), ")");
    case json::value_t::boolean:
      return Cat("a boolean (", value.get<bool>() ? "true" : "false", ")");
    default:
      return Cat("a number (", value.dump(), ")");
  }
}

Status Invalid(std::string message) { return Status::InvalidArgument(std::move(message)); }

// "worker" -> "workers" when count != 1.
std::string Count(long long count, std::string_view noun, std::string_view plural = "") {
  std::string out = Cat(Num(count), " ");
  if (count == 1) return Cat(out, noun);
  return plural.empty() ? Cat(out, noun, "s") : Cat(out, plural);
}

// A decimal integer with an optional sign, the whole text ("7", "-1", "+3"); the
// strings TensorFlow's int() turns into task indices. nullopt if not one, or if it
// does not fit in 64 bits (then it is out of range of any job anyway: the caller
// reports it as too large through `too_large`).
std::optional<std::int64_t> ParseDecimal(std::string_view text, bool* too_large) {
  *too_large = false;
  std::string_view digits = text;
  bool negative = false;
  if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) {
    negative = digits.front() == '-';
    digits.remove_prefix(1);
  }
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error == std::errc::result_out_of_range) {
    *too_large = true;
    return std::nullopt;
  }
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return negative ? -value : value;
}

// task.index as TFConfigClusterResolver.task_id reads it: int(task['index']).
// Python's int() takes integers, strings of digits, and truncates floats; dtlab
// takes the first two and whole floats (1.0), and refuses 1.5, which is surely a
// mistake. Booleans (int(True) is 1 in Python) are refused too.
StatusOr<std::int64_t> ParseIndex(const json& value) {
  // Far beyond any job's size, and exactly representable as a double.
  constexpr std::int64_t kHuge = std::int64_t{1} << 53;
  const std::string where = "TF_CONFIG task.index";
  const auto too_large = [&] {
    return Invalid(Cat(where, " is ", Kind(value), ", far outside the indices of any job"));
  };
  if (value.is_number_unsigned()) {
    if (value.get<std::uint64_t>() > static_cast<std::uint64_t>(kHuge)) return too_large();
    return static_cast<std::int64_t>(value.get<std::uint64_t>());
  }
  if (value.is_number_integer()) return value.get<std::int64_t>();
  if (value.is_number_float()) {
    const double number = value.get<double>();
    if (!std::isfinite(number) || number != std::trunc(number))
      return Invalid(Cat(where, " must be a whole number such as 0, got ", Kind(value)));
    if (std::abs(number) > static_cast<double>(kHuge)) return too_large();
    return static_cast<std::int64_t>(number);
  }
  if (value.is_string()) {
    bool out_of_range = false;
    const auto parsed = ParseDecimal(value.get_ref<const std::string&>(), &out_of_range);
    if (out_of_range || (parsed && (*parsed > kHuge || *parsed < -kHuge))) return too_large();
    if (parsed) return *parsed;
  }
  return Invalid(Cat(where, " must be an integer such as 0, got ", Kind(value)));
}

// One job of the cluster: a list of addresses, or a {"index": address} mapping
// (server_lib.ClusterSpec accepts both).
Status ParseJob(const std::string& job, const json& tasks, std::vector<std::string>* addresses) {
  const std::string where = Cat("TF_CONFIG cluster.", job);
  auto check_address = [&](const json& address, const std::string& path) -> Status {
    if (!address.is_string())
      return Invalid(Cat(path, " must be a \"host:port\" string, got ", Kind(address),
                         R"( (TensorFlow: "Task address must be bytes or unicode"))"));
    // TensorFlow accepts "" here, but no server can be reached there: an empty
    // address is a template left unfilled.
    if (address.get_ref<const std::string&>().empty())
      return Invalid(Cat(path, R"( is an empty address; write the task's "host:port", e.g. "10.0.0.2:2222")"));
    return Status::Ok();
  };
  if (tasks.is_array()) {
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      DTLAB_RETURN_IF_ERROR(check_address(tasks[i], Cat(where, "[", Num(static_cast<long long>(i)), "]")));
      addresses->push_back(tasks[i].get<std::string>());
    }
    return Status::Ok();
  }
  if (tasks.is_object()) {
    // ClusterSpec converts the keys with int(); dtlab also needs them dense
    // (0..n-1), since every task of the cluster is a rank or a named server.
    const std::size_t n = tasks.size();
    std::vector<const std::string*> by_index(n, nullptr);
    std::vector<std::string> keys(n);
    for (const auto& [key, address] : tasks.items()) {
      bool too_large = false;
      const auto index = ParseDecimal(key, &too_large);
      if (!index && !too_large)
        return Invalid(Cat(where, " has the key ", Quote(key),
                           R"(; a job written as an object maps task indices ("0", "1", ...) to addresses)"));
      const std::string path = Cat(where, "[", Quote(key), "]");
      DTLAB_RETURN_IF_ERROR(check_address(address, path));
      if (too_large || *index < 0 || static_cast<std::uint64_t>(*index) >= n) {
        // Some index below n is then missing: name the first.
        std::size_t missing = 0;
        std::vector<bool> seen(n, false);
        for (const auto& [other, unused] : tasks.items()) {
          bool big = false;
          const auto i = ParseDecimal(other, &big);
          if (i && *i >= 0 && static_cast<std::uint64_t>(*i) < n) seen[static_cast<std::size_t>(*i)] = true;
        }
        while (missing < n && seen[missing]) ++missing;
        return Invalid(Cat(where, " gives task ", Quote(key), " but no task ", Num(static_cast<long long>(missing)),
                           "; list every index from 0 to ", Num(static_cast<long long>(n) - 1),
                           ", or write the job as a list (TensorFlow allows gaps, but dtlab maps every task "
                           "onto a rank or a server)"));
      }
      const auto slot = static_cast<std::size_t>(*index);
      if (by_index[slot] != nullptr)
        return Invalid(Cat(where, " gives task ", Num(*index), " twice (keys ", Quote(keys[slot]), " and ", Quote(key),
                           "); keep one"));
      by_index[slot] = &address.get_ref<const std::string&>();
      keys[slot] = key;
    }
    for (const std::string* address : by_index) addresses->push_back(*address);
    return Status::Ok();
  }
  std::string message = Cat(where, R"( must be a list of "host:port" addresses, got )", Kind(tasks),
                            R"( (TensorFlow: "The tasks for job ')", job,
                            R"(' must be a list or a dictionary from integers to strings."))");
  if (tasks.is_string()) message += Cat("; write [", Quote(tasks.get_ref<const std::string&>()), "]");
  return Invalid(std::move(message));
}

Status ParseCluster(const json& cluster, std::map<std::string, std::vector<std::string>>* jobs) {
  if (!cluster.is_object())
    return Invalid(Cat(R"(TF_CONFIG cluster must be an object mapping job names to lists of "host:port" addresses, )",
                       R"(e.g. {"worker": ["host1:2222", "host2:2222"]}, got )", Kind(cluster)));
  if (cluster.empty())
    return Invalid(R"(TF_CONFIG cluster has no jobs; list every task, e.g. {"worker": ["host1:2222", "host2:2222"]} )"
                   "(with an empty cluster TensorFlow runs this process alone, not as part of a cluster)");
  for (const auto& [job, tasks] : cluster.items()) {
    if (!Contains(kJobs, job)) {
      std::string message = Cat("TF_CONFIG cluster has the job ", Quote(job), ", but the jobs must be among ", kJobList,
                                R"( (TensorFlow: "Disallowed task type found in cluster spec"))");
      message += job == "master" ? R"(; "master" is TensorFlow 1's name for the chief: rename it "chief")"
                                 : "; rename or remove it";
      return Invalid(std::move(message));
    }
    DTLAB_RETURN_IF_ERROR(ParseJob(job, tasks, &(*jobs)[job]));
  }
  return Status::Ok();
}

// An optional top-level string (rpc_layer, environment, session_master).
Status ParseOptionalString(const json& root, std::string_view key, std::string_view example, std::string* out) {
  const auto it = root.find(key);
  if (it == root.end()) return Status::Ok();
  if (!it->is_string())
    return Invalid(Cat("TF_CONFIG ", key, " must be a string such as ", Quote(example), ", got ", Kind(*it)));
  if (out != nullptr) *out = it->get<std::string>();
  return Status::Ok();
}

// The rules that relate cluster and task (multi_worker_util._validate_cluster_spec,
// in its order, then dtlab's own).
Status Validate(const TfConfig& config, std::int64_t index) {
  const std::string& type = config.task_type;
  if (!Contains(kJobs, type)) {
    std::string message = Cat("TF_CONFIG task.type is ", Quote(type), ", but it must be one of ", kJobList,
                              R"( (TensorFlow: "Unrecognized task_type"))");
    if (type == "master") message += R"(; "master" is TensorFlow 1's name: use "chief")";
    return Invalid(std::move(message));
  }
  // The evaluator may be absent from the cluster: it evaluates checkpoints on its
  // own and talks to no other task.
  if (type != "evaluator" && !config.cluster.contains(type)) {
    std::string jobs;
    for (const auto& [job, unused] : config.cluster) jobs += Cat(jobs.empty() ? "" : ", ", job);
    return Invalid(Cat("TF_CONFIG task.type is ", Quote(type), ", but the cluster has no ", type,
                       " job (TensorFlow: \"`task_type` '", type, "' not found in cluster_spec.\"); add cluster.", type,
                       " with this task's address, or use a job the cluster has: ", jobs));
  }
  if (config.NumTasks("chief") > 1)
    return Invalid(
        Cat("TF_CONFIG cluster.chief lists ", Num(config.NumTasks("chief")),
            " tasks, but there must be at most one (TensorFlow: \"There must be at most one 'chief' job.\"); "
            "keep one address in cluster.chief and move the others to cluster.worker"));
  if (config.NumTasks("evaluator") > 1)
    return Invalid(Cat("TF_CONFIG cluster.evaluator lists ", Num(config.NumTasks("evaluator")),
                       " tasks, but there must be at most one (TensorFlow: \"There must be at most one 'evaluator' "
                       "job.\"); keep one"));
  // TensorFlow would then name /job:chief/task:0, which does not exist, as the
  // collective leader, while is_chief makes no task the chief.
  if (config.cluster.contains("chief") && config.NumTasks("chief") == 0)
    return Invalid(
        "TF_CONFIG cluster.chief is empty; list the chief's \"host:port\", or remove cluster.chief so "
        "that worker 0 is the chief");
  if (index < 0)
    return Invalid(
        Cat("TF_CONFIG task.index is ", Num(index), "; task indices start at 0 (the first ", type, " is index 0)"));
  // TensorFlow does not check the index of an evaluator absent from the cluster;
  // there is at most one evaluator, so the only meaningful index is 0.
  if (!config.cluster.contains(type) && index != 0)
    return Invalid(Cat("TF_CONFIG task.index is ", Num(index),
                       ", but the evaluator is not in the cluster and there is "
                       "at most one evaluator: use index 0"));
  if (config.cluster.contains(type)) {
    const int size = config.NumTasks(type);
    if (index >= size) {
      std::string message =
          Cat("TF_CONFIG task.index is ", Num(index), ", but cluster.", type, " has ", Count(size, "task"));
      if (size > 0) message += size == 1 ? ", index 0" : Cat(", indices 0 to ", Num(size - 1));
      message += Cat(" (TensorFlow: \"The `task_id` ", Num(index), " exceeds the maximum id of ", type, ".\"); ");
      if (size == 1) message += "use index 0, or ";
      if (size > 1) message += Cat("use an index from 0 to ", Num(size - 1), ", or ");
      message += Cat("add this task's address to cluster.", type);
      return Invalid(std::move(message));
    }
  }
  if (config.NumWorkers() == 0)
    return Invalid(
        "TF_CONFIG cluster has no chief or worker task, so nothing trains (TensorFlow: \"No `worker`, "
        "`chief` or `evaluator` tasks can be found in `cluster_spec`.\"); add cluster.worker: "
        "[\"host:port\", ...]");
  return Status::Ok();
}

// The training task at `rank`: chief 0 first when there is a chief job, then the
// workers by index. REQUIRES: 0 <= rank < NumWorkers().
std::pair<std::string, int> TaskAtRank(const TfConfig& config, int rank) {
  if (config.HasChiefJob())
    return rank == 0 ? std::pair{std::string("chief"), 0} : std::pair{std::string("worker"), rank - 1};
  return {"worker", rank};
}

std::string TaskJson(const std::pair<std::string, int>& task) {
  return Cat(R"({"type": ")", task.first, R"(", "index": )", Num(task.second), "}");
}

std::string Address(const TfConfig& config, const std::string& job, int index) {
  const auto it = config.cluster.find(job);
  if (it == config.cluster.end() || index < 0 || static_cast<std::size_t>(index) >= it->second.size()) return "";
  return it->second[static_cast<std::size_t>(index)];
}

// The training tasks as "1 chief + 3 workers" or "3 workers".
std::string TrainingBreakdown(const TfConfig& config) {
  const int workers = config.NumTasks("worker");
  if (!config.HasChiefJob()) return Count(workers, "worker");
  return Cat("1 chief + ", Count(workers, "worker"));
}

}  // namespace

int TfConfig::NumTasks(std::string_view job) const {
  const auto it = cluster.find(std::string(job));
  return it == cluster.end() ? 0 : static_cast<int>(it->second.size());
}

bool TfConfig::HasChiefJob() const { return cluster.contains("chief"); }

int TfConfig::NumWorkers() const { return NumTasks("chief") + NumTasks("worker"); }

// multi_worker_util.is_chief: task chief, or worker 0 when there is no chief job.
bool TfConfig::IsChief() const {
  if (task_type == "chief") return true;
  return !HasChiefJob() && task_type == "worker" && task_index == 0;
}

// multi_worker_util.id_in_cluster: the chief is 0, worker i is i + (number of chiefs).
int TfConfig::WorkerRank() const {
  if (task_type == "chief") return 0;
  if (task_type == "worker") return task_index + NumTasks("chief");
  return -1;
}

std::vector<TfTask> TfConfig::Tasks() const {
  std::vector<TfTask> tasks;
  for (int rank = 0; rank < NumWorkers(); ++rank) {
    auto [type, index] = TaskAtRank(*this, rank);
    // Rank 0 is the chief: chief 0, or worker 0 when there is no chief job.
    tasks.push_back({type, index, Address(*this, type, index), rank, rank == 0 ? "chief" : type, false});
  }
  for (const char* job : {"ps", "evaluator"})
    for (int index = 0; index < NumTasks(job); ++index)
      tasks.push_back({job, index, Address(*this, job, index), -1, job, false});
  bool found = false;
  for (TfTask& task : tasks) {
    if (task.type == task_type && task.index == task_index) task.is_this_task = found = true;
  }
  if (!found && task_type == "evaluator") tasks.push_back({task_type, task_index, "", -1, task_type, true});
  return tasks;
}

std::string TfConfig::TaskName() const { return Cat(task_type, " ", Num(task_index)); }

std::string TfConfig::ChiefDescription() const {
  if (HasChiefJob())
    return Cat("chief 0 (", Shown(Address(*this, "chief", 0)),
               "): the cluster has a chief job, so its task is the chief");
  return Cat("worker 0 (", Shown(Address(*this, "worker", 0)), "): no chief job, so worker 0 is the chief");
}

StatusOr<TfConfig> ParseTfConfig(std::string_view text) {
  if (std::all_of(text.begin(), text.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }))
    return Invalid(Cat("TF_CONFIG is empty; set it to a JSON object such as ", kExample));
  // The deepest valid TF_CONFIG nests 3 levels ({"cluster": {"worker": [...]}});
  // deeper text is refused before the parser's recursive copies see it.
  if (const std::string error = JsonNestingError(text, kMaxTfConfigDepth); !error.empty())
    return Invalid(Cat("TF_CONFIG ", error, "; it must be a JSON object such as ", kExample));
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 9: ...":
    // keep what follows the bracketed id.
    std::string_view what = e.what();
    if (const auto end = what.find("] "); what.starts_with("[json.exception.") && end != std::string_view::npos)
      what.remove_prefix(end + 2);
    // The parser quotes the token it stopped at, which may be a long string.
    constexpr std::size_t kMax = 200;
    std::string message = Cat("TF_CONFIG is not valid JSON (", what.substr(0, kMax), what.size() > kMax ? "..." : "",
                              "); it must be a JSON object such as ", kExample);
    // The classic slip: str(config) in Python writes 'single quotes'.
    if (text.find('\'') != std::string_view::npos)
      message += "; JSON strings take double quotes (in Python, write json.dumps(config), not str(config))";
    return Invalid(std::move(message));
  }
  if (!root.is_object())
    return Invalid(Cat("TF_CONFIG must be a JSON object such as ", kExample, ", got ", Kind(root)));

  TfConfig config;
  const auto cluster = root.find("cluster");
  if (cluster == root.end())
    return Invalid(Cat(R"(TF_CONFIG has no "cluster"; add "cluster": {"worker": ["host:port", ...]} listing every )",
                       "task (without it TensorFlow runs this process alone, not as part of a cluster)"));
  DTLAB_RETURN_IF_ERROR(ParseCluster(*cluster, &config.cluster));

  // collective_all_reduce_strategy._initialize_multi_worker refuses a cluster
  // without task type and index, with this message.
  constexpr std::string_view kTfNoTask =
      R"( (TensorFlow: "When `cluster_spec` is given, you must also specify `task_type` and `task_id`."))";
  const auto task = root.find("task");
  if (task == root.end())
    return Invalid(Cat(R"(TF_CONFIG has no "task"; add "task": {"type": "worker", "index": 0} saying which task )",
                       "of the cluster this process is", kTfNoTask));
  if (!task->is_object())
    return Invalid(
        Cat(R"(TF_CONFIG task must be an object such as {"type": "worker", "index": 0}, got )", Kind(*task)));
  const auto type = task->find("type");
  if (type == task->end())
    return Invalid(
        Cat(R"(TF_CONFIG task has no "type"; add "type": "worker" (or "chief", "ps", "evaluator"))", kTfNoTask));
  if (!type->is_string())
    return Invalid(Cat(R"(TF_CONFIG task.type must be a string such as "worker", got )", Kind(*type)));
  config.task_type = type->get<std::string>();
  const auto index_value = task->find("index");
  if (index_value == task->end())
    return Invalid(Cat(R"(TF_CONFIG task has no "index"; add "index": 0 (this task's position in cluster.)",
                       config.task_type, ", from 0)", kTfNoTask));
  DTLAB_ASSIGN_OR_RETURN(const std::int64_t index, ParseIndex(*index_value));

  DTLAB_RETURN_IF_ERROR(ParseOptionalString(root, "rpc_layer", "grpc", &config.rpc_layer));
  DTLAB_RETURN_IF_ERROR(ParseOptionalString(root, "environment", "cloud", &config.environment));
  DTLAB_RETURN_IF_ERROR(ParseOptionalString(root, "session_master", "grpc://host0:2222", nullptr));
  // TensorFlow looks up only the keys it knows and never complains about others.
  for (const auto& [key, unused] : root.items())
    if (!Contains(kKnownKeys, key)) config.ignored_keys.push_back(key);
  for (const auto& [key, unused] : task->items())
    if (!Contains(kKnownTaskKeys, key)) config.ignored_keys.push_back(Cat("task.", key));

  DTLAB_RETURN_IF_ERROR(Validate(config, index));
  config.task_index = static_cast<int>(index);  // Validate bounded it by a job's size.
  return config;
}

Status CheckTfConfigAgainstWorld(const TfConfig& config, int world_size, int world_rank) {
  if (world_size < 1) return Invalid(Cat("the world size must be at least 1, got ", Num(world_size)));
  if (world_rank < 0 || world_rank >= world_size)
    return Invalid(Cat("rank ", Num(world_rank), " is outside a world of size ", Num(world_size), " (ranks 0 to ",
                       Num(world_size - 1), ")"));
  const int n = config.NumWorkers();
  if (world_size != n)
    return Invalid(Cat("the world has ", Count(world_size, "process", "processes"), " but TF_CONFIG has ",
                       Count(n, "training task"), " (", TrainingBreakdown(config),
                       "; ps and evaluator tasks are not ranks), one per rank; start ", Num(n),
                       " processes (e.g. mpirun -np ", Num(n), "), or list ", Num(world_size),
                       " tasks in cluster.chief and cluster.worker"));
  const int rank = config.WorkerRank();
  const std::string wanted = TaskJson(TaskAtRank(config, world_rank));
  if (rank < 0)
    return Invalid(Cat("this process is rank ", Num(world_rank), ", but TF_CONFIG's task is ", config.TaskName(),
                       ", which has no rank: only chief and worker tasks train and are ranks of the world; give rank ",
                       Num(world_rank), " the task ", wanted, ", and run ", config.task_type,
                       " tasks outside the world"));
  if (rank != world_rank)
    return Invalid(Cat("this process is rank ", Num(world_rank), ", but TF_CONFIG's task ", config.TaskName(),
                       " is rank ", Num(rank), " (the chief is rank 0, then the workers by index); give rank ",
                       Num(world_rank), " the task ", wanted, ", or run this TF_CONFIG as rank ", Num(rank)));
  return Status::Ok();
}

Status CheckParameterServerTfConfigAgainstWorld(const TfConfig& config, int world_size, int world_rank) {
  const int trainers = config.NumWorkers(), ps = config.NumTasks("ps");
  if (config.NumTasks("chief") == 0)
    return Invalid("parameter_server needs a chief task in TF_CONFIG: the coordinator, which runs as rank 0");
  if (ps == 0) return Invalid("parameter_server needs at least one ps task in TF_CONFIG");
  if (world_size != trainers + ps)
    return Invalid(Cat("the world has ", Count(world_size, "process", "processes"), " but TF_CONFIG has ",
                       Num(trainers + ps), " ranks for parameter_server (", TrainingBreakdown(config), " + ",
                       Count(ps, "ps task"), "); start ", Num(trainers + ps), " processes (mpirun -np ",
                       Num(trainers + ps), ")"));
  if (config.task_type == "ps") {
    const int rank = trainers + config.task_index;
    if (rank != world_rank)
      return Invalid(Cat("this process is rank ", Num(world_rank), ", but TF_CONFIG's task ", config.TaskName(),
                         " is rank ", Num(rank), " (the chief, the workers, then the ps tasks by index)"));
    return Status::Ok();
  }
  if (world_rank >= trainers)
    return Invalid(Cat("this process is rank ", Num(world_rank),
                       ", a parameter server's rank, but TF_CONFIG's task is ", config.TaskName(),
                       "; give it the task {\"type\": \"ps\", \"index\": ", Num(world_rank - trainers), "}"));
  return CheckTfConfigAgainstWorld(config, trainers, world_rank);
}

std::string DescribeTfConfig(const TfConfig& config) {
  const std::vector<TfTask> tasks = config.Tasks();
  const int ps = config.NumTasks("ps");
  const int evaluators = config.NumTasks("evaluator");
  std::string out =
      Cat("TF_CONFIG: ", Count(config.NumTasks("chief") + config.NumTasks("worker") + ps + evaluators, "task"), "; ",
          Num(config.NumWorkers()), " train (", TrainingBreakdown(config), ")");
  if (ps > 0) out += Cat(", ", Count(ps, "parameter server"));
  if (evaluators > 0) out += ", 1 evaluator";
  out += ".\n\n";

  // The table: rank, task, address, role; columns as wide as their longest cell.
  struct Row {
    std::string rank, task, address, role;
    bool mark;
  };
  std::vector<Row> rows = {{"rank", "task", "address", "role", false}};
  for (const TfTask& t : tasks) {
    rows.push_back({t.rank >= 0 ? Num(t.rank) : "-", Cat(t.type, " ", Num(t.index)),
                    t.address.empty() ? "(not in cluster)" : Shown(t.address), t.role, t.is_this_task});
  }
  std::size_t width[4] = {0, 0, 0, 0};
  for (const Row& row : rows) {
    width[0] = std::max(width[0], row.rank.size());
    width[1] = std::max(width[1], row.task.size());
    width[2] = std::max(width[2], row.address.size());
    width[3] = std::max(width[3], row.role.size());
  }
  for (const Row& row : rows) {
    std::string line = Cat("  ", row.rank, std::string(width[0] - row.rank.size() + 2, ' '), row.task,
                           std::string(width[1] - row.task.size() + 2, ' '), row.address,
                           std::string(width[2] - row.address.size() + 2, ' '), row.role);
    if (row.mark) line += Cat(std::string(width[3] - row.role.size() + 2, ' '), "<- this task");
    out += Cat(line, "\n");
  }

  out += Cat("\nChief: ", config.ChiefDescription(), ".\n");
  const std::string total = Count(config.NumWorkers(), "training task");
  if (config.WorkerRank() >= 0) {
    out += Cat("This task: ", config.TaskName(), ", rank ", Num(config.WorkerRank()), " of ", total);
    out += config.IsChief() ? "; it is the chief (it writes the checkpoints; the other workers write to temporary "
                              "directories).\n"
                            : ".\n";
  } else if (config.task_type == "ps") {
    out += Cat("This task: ", config.TaskName(), ", a parameter server: it holds variables for the ", total,
               " and has no rank.\n");
  } else {
    out += Cat("This task: ", config.TaskName(), ", the evaluator: it evaluates checkpoints beside the ", total,
               " and has no rank");
    out += config.cluster.contains("evaluator") ? ".\n" : " (it is not in the cluster, which TensorFlow allows).\n";
  }
  out += config.rpc_layer.empty() ? "rpc_layer: not set (TensorFlow's servers then use grpc)\n"
                                  : Cat("rpc_layer: ", Shown(config.rpc_layer), "\n");
  if (!config.environment.empty()) out += Cat("environment: ", Shown(config.environment), "\n");
  if (!config.ignored_keys.empty()) {
    std::string keys;
    for (const std::string& key : config.ignored_keys) keys += Cat(keys.empty() ? "" : ", ", Quote(key));
    out += Cat("Ignored keys (TensorFlow does not read them either): ", keys, "\n");
  }
  return out;
}

}  // namespace dtlab
