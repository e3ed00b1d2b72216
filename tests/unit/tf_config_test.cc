// TF_CONFIG parsing and validation (sim/comm/tf_config.h): valid clusters with and
// without chief, ps and evaluator; the chief rule (chief 0, else worker 0); ranks
// (chief first, then workers); every error case, with its message naming where
// the problem is; and the check against an MPI-like world.
#include <gtest/gtest.h>

#include <string>

#include "sim/comm/tf_config.h"

namespace dtlab {
namespace {

constexpr const char* kFull =
    R"({"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"],)"
    R"( "ps": ["host3:2222"], "evaluator": ["host4:2222"]},)"
    R"( "task": {"type": "worker", "index": 1}, "rpc_layer": "grpc", "environment": "cloud"})";

// A config whose cluster is `cluster` and whose task is type/index.
std::string Config(const std::string& cluster, const std::string& type, int index) {
  return R"({"cluster": )" + cluster + R"(, "task": {"type": ")" + type + R"(", "index": )" + std::to_string(index) +
         "}}";
}

const std::string kThreeWorkers = R"({"worker": ["a:1", "b:1", "c:1"]})";

TfConfig Parse(const std::string& text) {
  auto config = ParseTfConfig(text);
  EXPECT_TRUE(config.ok()) << config.status().ToString() << "\n  for " << text;
  return config.ok() ? *config : TfConfig{};
}

// The error message for `text`, which must be invalid.
std::string Error(const std::string& text) {
  auto config = ParseTfConfig(text);
  EXPECT_FALSE(config.ok()) << "accepted: " << text;
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), Status::Code::kInvalidArgument);
  return config.status().message();
}

#define EXPECT_ERROR_HAS(text, part) EXPECT_NE(Error(text).find(part), std::string::npos) << Error(text)

TEST(TfConfigTest, FullClusterWithChiefPsAndEvaluator) {
  const TfConfig c = Parse(kFull);
  EXPECT_EQ(c.cluster.size(), 4u);
  EXPECT_EQ(c.cluster.at("worker"), (std::vector<std::string>{"host1:2222", "host2:2222"}));
  EXPECT_EQ(c.task_type, "worker");
  EXPECT_EQ(c.task_index, 1);
  EXPECT_EQ(c.rpc_layer, "grpc");
  EXPECT_EQ(c.environment, "cloud");
  EXPECT_TRUE(c.ignored_keys.empty());
  EXPECT_EQ(c.NumWorkers(), 3);  // chief + 2 workers; ps and evaluator do not train
  EXPECT_TRUE(c.HasChiefJob());
  EXPECT_FALSE(c.IsChief());
  EXPECT_EQ(c.WorkerRank(), 2);  // chief is 0, worker 0 is 1, worker 1 is 2
  EXPECT_EQ(c.TaskName(), "worker 1");
  EXPECT_EQ(c.ChiefDescription(), "chief 0 (host0:2222): the cluster has a chief job, so its task is the chief");
}

TEST(TfConfigTest, TasksListTrainingTasksInRankOrderThenPsThenEvaluator) {
  const std::vector<TfTask> tasks = Parse(kFull).Tasks();
  ASSERT_EQ(tasks.size(), 5u);
  const char* types[] = {"chief", "worker", "worker", "ps", "evaluator"};
  const int indices[] = {0, 0, 1, 0, 0};
  const int ranks[] = {0, 1, 2, -1, -1};
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    EXPECT_EQ(tasks[i].type, types[i]) << i;
    EXPECT_EQ(tasks[i].index, indices[i]) << i;
    EXPECT_EQ(tasks[i].rank, ranks[i]) << i;
    EXPECT_EQ(tasks[i].address, "host" + std::to_string(i) + ":2222") << i;
    EXPECT_EQ(tasks[i].is_this_task, i == 2) << i;
    EXPECT_EQ(tasks[i].role, types[i]) << i;
  }
}

TEST(TfConfigTest, WithoutChiefJobWorkerZeroIsTheChief) {
  for (int index = 0; index < 3; ++index) {
    const TfConfig c = Parse(Config(kThreeWorkers, "worker", index));
    EXPECT_FALSE(c.HasChiefJob());
    EXPECT_EQ(c.NumWorkers(), 3);
    EXPECT_EQ(c.IsChief(), index == 0) << index;
    EXPECT_EQ(c.WorkerRank(), index);
    EXPECT_EQ(c.ChiefDescription(), "worker 0 (a:1): no chief job, so worker 0 is the chief");
    EXPECT_EQ(c.Tasks()[0].role, "chief");
    EXPECT_EQ(c.Tasks()[1].role, "worker");
  }
}

TEST(TfConfigTest, ChiefTaskIsTheChiefAndRankZero) {
  const TfConfig c = Parse(Config(R"({"chief": ["c:1"], "worker": ["a:1", "b:1"]})", "chief", 0));
  EXPECT_TRUE(c.IsChief());
  EXPECT_EQ(c.WorkerRank(), 0);
  EXPECT_EQ(c.NumWorkers(), 3);
  // With a chief job, worker 0 is not the chief, and is rank 1.
  const TfConfig w = Parse(Config(R"({"chief": ["c:1"], "worker": ["a:1", "b:1"]})", "worker", 0));
  EXPECT_FALSE(w.IsChief());
  EXPECT_EQ(w.WorkerRank(), 1);
}

TEST(TfConfigTest, ChiefAloneWithoutWorkers) {
  const TfConfig c = Parse(Config(R"({"chief": ["c:1"]})", "chief", 0));
  EXPECT_EQ(c.NumWorkers(), 1);
  EXPECT_TRUE(c.IsChief());
  EXPECT_TRUE(CheckTfConfigAgainstWorld(c, 1, 0).ok());
}

TEST(TfConfigTest, PsAndEvaluatorTasksHaveNoRank) {
  const std::string cluster = R"({"worker": ["a:1", "b:1"], "ps": ["p:1", "q:1"], "evaluator": ["e:1"]})";
  const TfConfig ps = Parse(Config(cluster, "ps", 1));
  EXPECT_EQ(ps.WorkerRank(), -1);
  EXPECT_FALSE(ps.IsChief());
  EXPECT_EQ(ps.NumWorkers(), 2);
  const TfConfig evaluator = Parse(Config(cluster, "evaluator", 0));
  EXPECT_EQ(evaluator.WorkerRank(), -1);
  EXPECT_FALSE(evaluator.IsChief());  // TensorFlow's is_chief says true here; see tf_config.h
}

TEST(TfConfigTest, EvaluatorMayBeAbsentFromTheCluster) {
  // multi_worker_util._validate_cluster_spec: "The only exception is `evaluator`".
  const TfConfig c = Parse(Config(kThreeWorkers, "evaluator", 0));
  EXPECT_EQ(c.WorkerRank(), -1);
  const std::vector<TfTask> tasks = c.Tasks();
  ASSERT_EQ(tasks.size(), 4u);
  EXPECT_EQ(tasks.back().type, "evaluator");
  EXPECT_EQ(tasks.back().address, "");
  EXPECT_TRUE(tasks.back().is_this_task);
  EXPECT_NE(DescribeTfConfig(c).find("(not in cluster)"), std::string::npos);
  EXPECT_ERROR_HAS(Config(kThreeWorkers, "evaluator", 1), "the evaluator is not in the cluster");
}

TEST(TfConfigTest, JobAsIndexMappingIsAcceptedWhenDense) {
  // server_lib.ClusterSpec also takes {index: address}; keys are converted by int().
  const TfConfig c =
      Parse(R"({"cluster": {"worker": {"1": "b:1", "0": "a:1"}}, "task": {"type": "worker", "index": 1}})");
  EXPECT_EQ(c.cluster.at("worker"), (std::vector<std::string>{"a:1", "b:1"}));
  EXPECT_EQ(c.WorkerRank(), 1);
}

TEST(TfConfigTest, IndexConversionsFollowPythonInt) {
  // TFConfigClusterResolver.task_id is int(task['index']): strings of digits and
  // whole floats are integers too.
  EXPECT_EQ(Parse(R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": "1"}})").task_index,
            1);
  EXPECT_EQ(Parse(R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1.0}})").task_index,
            1);
  EXPECT_ERROR_HAS(R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0.5}})",
                   "TF_CONFIG task.index must be a whole number such as 0, got a number (0.5)");
  EXPECT_ERROR_HAS(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": "one"}})",
                   R"(TF_CONFIG task.index must be an integer such as 0, got a string ("one"))");
  EXPECT_ERROR_HAS(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": true}})",
                   "got a boolean (true)");
  EXPECT_ERROR_HAS(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 1e300}})",
                   "far outside the indices of any job");
  EXPECT_ERROR_HAS(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": "99999999999999999999"}})",
                   "far outside the indices of any job");
}

TEST(TfConfigTest, UnknownKeysAreIgnoredAndRecorded) {
  // TensorFlow reads only the keys it knows, and never complains about others.
  const TfConfig c = Parse(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0, "trial": "7"},)"
                           R"( "rpc_layr": "grpc", "session_master": "grpc://a:1"})");
  EXPECT_EQ(c.ignored_keys, (std::vector<std::string>{"rpc_layr", "task.trial"}));
  EXPECT_EQ(c.rpc_layer, "");
  EXPECT_NE(
      DescribeTfConfig(c).find(R"(Ignored keys (TensorFlow does not read them either): "rpc_layr", "task.trial")"),
      std::string::npos);
}

TEST(TfConfigTest, EmptyNonChiefJobsAreAllowed) {
  const TfConfig c = Parse(Config(R"({"worker": ["a:1"], "ps": []})", "worker", 0));
  EXPECT_EQ(c.NumTasks("ps"), 0);
  EXPECT_EQ(c.NumWorkers(), 1);
}

// Every error names where the problem is; a few are held word for word.
TEST(TfConfigTest, MalformedJson) {
  EXPECT_EQ(Error(""), R"(TF_CONFIG is empty; set it to a JSON object such as {"cluster": {"worker": )"
                       R"(["localhost:12345", "localhost:23456"]}, "task": {"type": "worker", "index": 0}})");
  EXPECT_ERROR_HAS(" \n", "TF_CONFIG is empty");
  EXPECT_ERROR_HAS(R"({"cluster": )", "TF_CONFIG is not valid JSON (parse error at line 1, column 13:");
  EXPECT_ERROR_HAS(R"({'cluster': {}})",
                   "; JSON strings take double quotes (in Python, write json.dumps(config), "
                   "not str(config))");
  EXPECT_ERROR_HAS(R"({"cluster": {"worker": ["a:1",]}})", "TF_CONFIG is not valid JSON");
  EXPECT_ERROR_HAS(R"(["a:1"])", "TF_CONFIG must be a JSON object such as");
  EXPECT_ERROR_HAS(R"("worker")", "got a string (\"worker\")");
}

TEST(TfConfigTest, ClusterErrors) {
  EXPECT_EQ(Error(R"({"task": {"type": "worker", "index": 0}})"),
            R"(TF_CONFIG has no "cluster"; add "cluster": {"worker": ["host:port", ...]} listing every task )"
            "(without it TensorFlow runs this process alone, not as part of a cluster)");
  EXPECT_ERROR_HAS(R"({"cluster": ["a:1"]})", "TF_CONFIG cluster must be an object mapping job names");
  EXPECT_ERROR_HAS(R"({"cluster": null})", "got null");
  EXPECT_ERROR_HAS(R"({"cluster": {}})", "TF_CONFIG cluster has no jobs");
  EXPECT_ERROR_HAS(Config(R"({"master": ["a:1"]})", "worker", 0),
                   R"(TF_CONFIG cluster has the job "master", but the jobs must be among "chief", "worker", "ps" )"
                   R"(and "evaluator" (TensorFlow: "Disallowed task type found in cluster spec"); "master" is )"
                   R"(TensorFlow 1's name for the chief: rename it "chief")");
  EXPECT_ERROR_HAS(Config(R"({"worker": ["a:1"], "trainer": ["b:1"]})", "worker", 0), "rename or remove it");
}

TEST(TfConfigTest, JobAndAddressErrors) {
  EXPECT_EQ(Error(Config(R"({"worker": "a:1"})", "worker", 0)),
            R"(TF_CONFIG cluster.worker must be a list of "host:port" addresses, got a string ("a:1") )"
            R"((TensorFlow: "The tasks for job 'worker' must be a list or a dictionary from integers to strings."); )"
            R"(write ["a:1"])");
  EXPECT_ERROR_HAS(Config(R"({"worker": 2})", "worker", 0), "TF_CONFIG cluster.worker must be a list");
  EXPECT_EQ(Error(Config(R"({"worker": ["a:1", ""]})", "worker", 0)),
            R"(TF_CONFIG cluster.worker[1] is an empty address; write the task's "host:port", e.g. "10.0.0.2:2222")");
  EXPECT_ERROR_HAS(Config(R"({"worker": ["a:1", 2222]})", "worker", 0),
                   R"(TF_CONFIG cluster.worker[1] must be a "host:port" string, got a number (2222))");
  EXPECT_ERROR_HAS(Config(R"({"worker": ["a:1"], "ps": [null]})", "worker", 0), "TF_CONFIG cluster.ps[0]");
  EXPECT_ERROR_HAS(Config(R"({"worker": {"0": "a:1", "2": "c:1"}})", "worker", 0),
                   R"(TF_CONFIG cluster.worker gives task "2" but no task 1)");
  EXPECT_ERROR_HAS(Config(R"({"worker": {"0": "a:1", "00": "c:1"}})", "worker", 0),
                   R"(gives task 0 twice (keys "0" and "00"))");
  EXPECT_ERROR_HAS(Config(R"({"worker": {"first": "a:1"}})", "worker", 0),
                   R"(TF_CONFIG cluster.worker has the key "first")");
  EXPECT_ERROR_HAS(Config(R"({"worker": {"0": ""}})", "worker", 0), R"(TF_CONFIG cluster.worker["0"] is an empty)");
}

TEST(TfConfigTest, ChiefAndEvaluatorCounts) {
  EXPECT_EQ(Error(Config(R"({"chief": ["c:1", "d:1"], "worker": ["a:1"]})", "worker", 0)),
            "TF_CONFIG cluster.chief lists 2 tasks, but there must be at most one (TensorFlow: \"There must be at "
            "most one 'chief' job.\"); keep one address in cluster.chief and move the others to cluster.worker");
  EXPECT_ERROR_HAS(Config(R"({"chief": [], "worker": ["a:1"]})", "worker", 0),
                   "TF_CONFIG cluster.chief is empty; list the chief's \"host:port\", or remove cluster.chief so that "
                   "worker 0 is the chief");
  EXPECT_ERROR_HAS(Config(R"({"worker": ["a:1"], "evaluator": ["e:1", "f:1"]})", "worker", 0),
                   "TF_CONFIG cluster.evaluator lists 2 tasks, but there must be at most one");
  EXPECT_ERROR_HAS(Config(R"({"ps": ["p:1"], "evaluator": ["e:1"]})", "ps", 0),
                   "TF_CONFIG cluster has no chief or worker task, so nothing trains");
}

TEST(TfConfigTest, TaskErrors) {
  EXPECT_EQ(Error(R"({"cluster": {"worker": ["a:1"]}})"),
            R"(TF_CONFIG has no "task"; add "task": {"type": "worker", "index": 0} saying which task of the cluster )"
            R"(this process is (TensorFlow: "When `cluster_spec` is given, you must also specify `task_type` and )"
            R"(`task_id`."))");
  EXPECT_ERROR_HAS(R"({"cluster": {"worker": ["a:1"]}, "task": "worker"})", "TF_CONFIG task must be an object");
  EXPECT_ERROR_HAS(R"({"cluster": {"worker": ["a:1"]}, "task": {"index": 0}})", R"(TF_CONFIG task has no "type")");
  EXPECT_ERROR_HAS(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": 1, "index": 0}})",
                   "TF_CONFIG task.type must be a string");
  EXPECT_ERROR_HAS(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker"}})",
                   R"(TF_CONFIG task has no "index"; add "index": 0 (this task's position in cluster.worker, from 0))");
  EXPECT_ERROR_HAS(Config(kThreeWorkers, "master", 0),
                   R"(TF_CONFIG task.type is "master", but it must be one of "chief", "worker", "ps" and "evaluator")");
  EXPECT_EQ(Error(Config(kThreeWorkers, "ps", 0)),
            R"(TF_CONFIG task.type is "ps", but the cluster has no ps job (TensorFlow: "`task_type` 'ps' not found )"
            R"(in cluster_spec."); add cluster.ps with this task's address, or use a job the cluster has: worker)");
  EXPECT_ERROR_HAS(Config(kThreeWorkers, "chief", 0), "the cluster has no chief job");
}

TEST(TfConfigTest, IndexOutOfRange) {
  EXPECT_EQ(Error(Config(kThreeWorkers, "worker", 3)),
            "TF_CONFIG task.index is 3, but cluster.worker has 3 tasks, indices 0 to 2 (TensorFlow: \"The `task_id` "
            "3 exceeds the maximum id of worker.\"); use an index from 0 to 2, or add this task's address to "
            "cluster.worker");
  EXPECT_ERROR_HAS(Config(R"({"worker": ["a:1"], "chief": ["c:1"]})", "chief", 1), "use index 0, or");
  EXPECT_ERROR_HAS(Config(R"({"worker": ["a:1"], "ps": []})", "ps", 0),
                   "cluster.ps has 0 tasks (TensorFlow: \"The `task_id` 0 exceeds the maximum id of ps.\"); add");
  EXPECT_EQ(Error(Config(kThreeWorkers, "worker", -1)),
            "TF_CONFIG task.index is -1; task indices start at 0 (the first worker is index 0)");
}

TEST(TfConfigTest, OptionalStringsMustBeStrings) {
  EXPECT_ERROR_HAS(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}, "rpc_layer": 1})",
                   R"(TF_CONFIG rpc_layer must be a string such as "grpc", got a number (1))");
  EXPECT_ERROR_HAS(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}, "environment": []})",
                   "TF_CONFIG environment must be a string");
  EXPECT_ERROR_HAS(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}, "session_master": 0})",
                   "TF_CONFIG session_master must be a string");
}

TEST(TfConfigTest, LongAndControlCharacterValuesAreQuotedShort) {
  const std::string message =
      Error(Config(R"({"worker": [")" + std::string(500, 'x') + R"("], "boss": []})", "worker", 0));
  EXPECT_NE(message.find(R"(the job "boss")"), std::string::npos) << message;
  const std::string type = Error(Config(kThreeWorkers, std::string(200, 'y') + "\\u001b", 0));
  EXPECT_NE(type.find("\"" + std::string(60, 'y') + "...\""), std::string::npos) << type;
  // An escape character in an address is shown quoted, not sent to the terminal.
  const TfConfig c = Parse(Config(R"({"worker": ["a\u001b[2J:1"]})", "worker", 0));
  EXPECT_NE(DescribeTfConfig(c).find(R"("a\x1b[2J:1")"), std::string::npos) << DescribeTfConfig(c);
}

TEST(TfConfigTest, WorldMatches) {
  for (int index = 0; index < 2; ++index) {
    const TfConfig c = Parse(Config(R"({"chief": ["c:1"], "worker": ["a:1", "b:1"], "ps": ["p:1"]})", "worker", index));
    EXPECT_TRUE(CheckTfConfigAgainstWorld(c, 3, index + 1).ok()) << index;  // ps tasks are not ranks
  }
}

TEST(TfConfigTest, WorldSizeMismatch) {
  const TfConfig c =
      Parse(Config(R"({"chief": ["c:1"], "worker": ["a:1", "b:1", "d:1"], "ps": ["p:1"]})", "worker", 0));
  const Status s = CheckTfConfigAgainstWorld(c, 3, 1);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "the world has 3 processes but TF_CONFIG has 4 training tasks (1 chief + 3 workers; ps and evaluator "
            "tasks are not ranks), one per rank; start 4 processes (e.g. mpirun -np 4), or list 3 tasks in "
            "cluster.chief and cluster.worker");
}

TEST(TfConfigTest, WorldRankMismatch) {
  const TfConfig c = Parse(Config(R"({"chief": ["c:1"], "worker": ["a:1", "b:1"]})", "worker", 1));
  EXPECT_EQ(
      CheckTfConfigAgainstWorld(c, 3, 1).message(),
      R"(this process is rank 1, but TF_CONFIG's task worker 1 is rank 2 (the chief is rank 0, then the )"
      R"(workers by index); give rank 1 the task {"type": "worker", "index": 0}, or run this TF_CONFIG as rank 2)");
  const TfConfig no_chief = Parse(Config(kThreeWorkers, "worker", 2));
  EXPECT_NE(CheckTfConfigAgainstWorld(no_chief, 3, 0)
                .message()
                .find(R"(give rank 0 the task {"type": "worker", )"
                      R"("index": 0})"),
            std::string::npos);
  EXPECT_TRUE(CheckTfConfigAgainstWorld(no_chief, 3, 2).ok());
}

TEST(TfConfigTest, WorldRejectsPsAndBadWorlds) {
  const TfConfig ps = Parse(Config(R"({"worker": ["a:1", "b:1"], "ps": ["p:1"]})", "ps", 0));
  EXPECT_NE(CheckTfConfigAgainstWorld(ps, 2, 1).message().find("TF_CONFIG's task is ps 0, which has no rank"),
            std::string::npos);
  const TfConfig w = Parse(Config(kThreeWorkers, "worker", 0));
  EXPECT_EQ(CheckTfConfigAgainstWorld(w, 0, 0).message(), "the world size must be at least 1, got 0");
  EXPECT_EQ(CheckTfConfigAgainstWorld(w, 3, 3).message(), "rank 3 is outside a world of size 3 (ranks 0 to 2)");
  EXPECT_EQ(CheckTfConfigAgainstWorld(w, 3, -1).code(), Status::Code::kInvalidArgument);
}

TEST(TfConfigTest, DescriptionTable) {
  EXPECT_EQ(DescribeTfConfig(Parse(kFull)),
            "TF_CONFIG: 5 tasks; 3 train (1 chief + 2 workers), 1 parameter server, 1 evaluator.\n"
            "\n"
            "  rank  task         address     role\n"
            "  0     chief 0      host0:2222  chief\n"
            "  1     worker 0     host1:2222  worker\n"
            "  2     worker 1     host2:2222  worker     <- this task\n"
            "  -     ps 0         host3:2222  ps\n"
            "  -     evaluator 0  host4:2222  evaluator\n"
            "\n"
            "Chief: chief 0 (host0:2222): the cluster has a chief job, so its task is the chief.\n"
            "This task: worker 1, rank 2 of 3 training tasks.\n"
            "rpc_layer: grpc\n"
            "environment: cloud\n");
  const std::string no_chief = DescribeTfConfig(Parse(Config(kThreeWorkers, "worker", 0)));
  EXPECT_NE(no_chief.find("  0     worker 0  a:1      chief   <- this task\n"), std::string::npos) << no_chief;
  EXPECT_NE(no_chief.find("Chief: worker 0 (a:1): no chief job, so worker 0 is the chief.\n"), std::string::npos);
  EXPECT_NE(no_chief.find("rank 0 of 3 training tasks; it is the chief"), std::string::npos);
  EXPECT_NE(no_chief.find("rpc_layer: not set"), std::string::npos);
}

// ParameterServerStrategy across MPI ranks: chief (rank 0), workers, then ps tasks.
TEST(TfConfigTest, ParameterServerWorldMapsPsTasksAfterTheTrainers) {
  const std::string cluster = R"({"chief": ["c:1"], "worker": ["a:1", "b:1"], "ps": ["p:1", "q:1"]})";
  EXPECT_TRUE(CheckParameterServerTfConfigAgainstWorld(Parse(Config(cluster, "chief", 0)), 5, 0).ok());
  EXPECT_TRUE(CheckParameterServerTfConfigAgainstWorld(Parse(Config(cluster, "worker", 1)), 5, 2).ok());
  EXPECT_TRUE(CheckParameterServerTfConfigAgainstWorld(Parse(Config(cluster, "ps", 0)), 5, 3).ok());
  EXPECT_TRUE(CheckParameterServerTfConfigAgainstWorld(Parse(Config(cluster, "ps", 1)), 5, 4).ok());
  EXPECT_EQ(CheckParameterServerTfConfigAgainstWorld(Parse(Config(cluster, "ps", 1)), 5, 3).message(),
            "this process is rank 3, but TF_CONFIG's task ps 1 is rank 4 (the chief, the workers, then the ps tasks "
            "by index)");
  EXPECT_EQ(CheckParameterServerTfConfigAgainstWorld(Parse(Config(cluster, "worker", 0)), 5, 4).message(),
            R"(this process is rank 4, a parameter server's rank, but TF_CONFIG's task is worker 0; give it the task )"
            R"({"type": "ps", "index": 1})");
  EXPECT_EQ(CheckParameterServerTfConfigAgainstWorld(Parse(Config(cluster, "chief", 0)), 4, 0).message(),
            "the world has 4 processes but TF_CONFIG has 5 ranks for parameter_server (1 chief + 2 workers + 2 ps "
            "tasks); start 5 processes (mpirun -np 5)");
}

TEST(TfConfigTest, ParameterServerWorldNeedsAChiefAndAPsTask) {
  const TfConfig no_chief = Parse(Config(R"({"worker": ["a:1", "b:1"], "ps": ["p:1"]})", "worker", 0));
  EXPECT_EQ(CheckParameterServerTfConfigAgainstWorld(no_chief, 3, 0).message(),
            "parameter_server needs a chief task in TF_CONFIG: the coordinator, which runs as rank 0");
  const TfConfig no_ps = Parse(Config(R"({"chief": ["c:1"], "worker": ["a:1"]})", "worker", 0));
  EXPECT_EQ(CheckParameterServerTfConfigAgainstWorld(no_ps, 2, 1).message(),
            "parameter_server needs at least one ps task in TF_CONFIG");
}

}  // namespace
}  // namespace dtlab
