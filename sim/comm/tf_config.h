// TF_CONFIG: the JSON environment variable through which TensorFlow's
// multi-worker strategies (MultiWorkerMirroredStrategy, ParameterServerStrategy)
// learn the cluster and which task this process is:
//
//   {"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"],
//                "ps": ["host3:2222"], "evaluator": ["host4:2222"]},
//    "task": {"type": "worker", "index": 0},
//    "rpc_layer": "grpc", "environment": "cloud"}
//
// ParseTfConfig reads and validates it with TensorFlow's rules, and TfConfig
// answers what the strategies derive from it: how many tasks train, which is the
// chief, and this task's rank. Sources (TensorFlow 2.x):
//   tensorflow/python/distribute/cluster_resolver/tfconfig_cluster_resolver.py
//     (TFConfigClusterResolver: which keys are read, how task.type and task.index
//     are converted; every other key is ignored),
//   tensorflow/python/training/server_lib.py (ClusterSpec: a job is a list of
//     addresses or a {index: address} mapping; addresses must be strings),
//   tensorflow/python/distribute/multi_worker_util.py (_validate_cluster_spec,
//     is_chief, worker_count, id_in_cluster: the rules and their error wording),
//   tensorflow/python/distribute/collective_all_reduce_strategy.py
//     (_initialize_multi_worker: task type and index are required).
// Where dtlab is stricter than TensorFlow it says so below and in docs/tf_config.md.
//
// Thread safety: TfConfig is a value; the functions are pure.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dtlab {

/// One task of the cluster as `dtlab cluster` lists it.
struct TfTask {
  std::string type;     ///< "chief", "worker", "ps" or "evaluator"
  int index = 0;        ///< its index within its job
  std::string address;  ///< "host:port"; empty only for an evaluator that is not in the cluster
  int rank = -1;        ///< its rank among the training tasks; -1 for ps and evaluator
  std::string role;     ///< "chief" for the chief (chief 0, or worker 0 without a chief job), else type
  bool is_this_task = false;
};

/// A validated TF_CONFIG (see ParseTfConfig for the rules it satisfies).
struct TfConfig {
  /// Job name ("chief", "worker", "ps", "evaluator") -> its task addresses, by task index.
  std::map<std::string, std::vector<std::string>> cluster;
  std::string task_type;  ///< this process's job
  int task_index = 0;     ///< this process's index in its job
  std::string rpc_layer;  ///< "" when absent (TensorFlow's servers then use grpc)
  /// "" when absent. TFConfigClusterResolver itself ignores it; the Estimator's
  /// train_and_evaluate reads it ("google" selects Google's internal setup).
  std::string environment;
  /// Keys TensorFlow does not read, which it (and dtlab) therefore ignores, as paths:
  /// "foo" at the top level, "task.foo" inside task. Listed by DescribeTfConfig so a
  /// misspelt optional key ("rpc_layr") does not go unnoticed.
  std::vector<std::string> ignored_keys;

  /// Tasks in `job`; 0 when the cluster has no such job.
  int NumTasks(std::string_view job) const;
  /// Whether the cluster has a "chief" job (then chief 0 is the chief, else worker 0).
  bool HasChiefJob() const;
  /// Tasks that train: chief + worker tasks (multi_worker_util.worker_count; the
  /// chief is a worker too). ps and evaluator tasks do not count.
  int NumWorkers() const;
  /// Whether this task is the chief of the training cluster: task chief 0, or
  /// worker 0 when the cluster has no chief job. (TensorFlow's is_chief also
  /// answers true for the evaluator, the chief of its own one-task cluster; this
  /// does not, since the evaluator neither trains nor writes training checkpoints.)
  bool IsChief() const;
  /// This task's rank among the training tasks: the chief is rank 0, then the
  /// workers in index order (multi_worker_util.id_in_cluster); -1 for ps and
  /// evaluator tasks, which have no rank.
  int WorkerRank() const;
  /// Every task: the training tasks in rank order, then ps, then the evaluator
  /// (also when this task is an evaluator absent from the cluster).
  std::vector<TfTask> Tasks() const;
  /// "worker 1": this task's type and index.
  std::string TaskName() const;
  /// Which task is the chief and why, e.g. "worker 0 (host1:2222): no chief job,
  /// so worker 0 is the chief". Requires NumWorkers() >= 1.
  std::string ChiefDescription() const;
};

/// Parses and validates TF_CONFIG text. The rules (TensorFlow's unless marked):
/// - valid JSON, an object; "cluster" and "task" are required (TensorFlow would
///   fall back to a one-machine run without "cluster" and fail without "task";
///   dtlab is for multi-worker runs, so both are errors);
/// - cluster: an object whose jobs are among chief, worker, ps and evaluator; each
///   job a list of address strings, or a {"0": address, ...} mapping whose indices
///   must be 0..n-1 (dtlab: TensorFlow also allows gaps, but every task needs a
///   rank); addresses must not be empty (dtlab; TensorFlow only checks they are
///   strings); at most one chief and one evaluator; a chief job must not be empty
///   (dtlab: TensorFlow would name a chief that does not exist); at least one
///   chief or worker task;
/// - task.type: one of the four; a job of the cluster unless it is "evaluator";
/// - task.index: an integer (or a string holding one, as TensorFlow's int()
///   accepts), 0 or more (dtlab), below the size of its job when the job is in the
///   cluster;
/// - rpc_layer, environment, session_master: strings when present; other keys are
///   ignored (recorded in ignored_keys).
/// Errors are InvalidArgument naming the offending path ("cluster.worker[1]",
/// "task.index"), what is wrong, how to fix it, and TensorFlow's wording where
/// TensorFlow has a message for it.
StatusOr<TfConfig> ParseTfConfig(std::string_view json);

/// Checks the config against an MPI-like world of `world_size` processes in which
/// this process is `world_rank`. The world holds the training tasks only (one rank
/// per chief or worker task; ps and evaluator tasks run outside it), so world_size
/// must equal NumWorkers() and world_rank must equal WorkerRank(); a ps or
/// evaluator task cannot be a rank. InvalidArgument otherwise, naming both numbers
/// and what to change.
Status CheckTfConfigAgainstWorld(const TfConfig& config, int world_size, int world_rank);

/// The same for a parameter-server run (ParameterServerStrategy across MPI ranks,
/// docs/mpi.md): the chief (the coordinator) is rank 0, the workers follow, then
/// the ps tasks; world_size must equal chief + workers + ps. InvalidArgument
/// without a chief job (ParameterServerStrategy's coordinator) or when this task
/// is not at world_rank.
Status CheckParameterServerTfConfigAgainstWorld(const TfConfig& config, int world_size, int world_rank);

/// A human-readable account of the config, used by `dtlab cluster`: a summary
/// line, a table of the tasks (rank, task, address, role; this task marked), which
/// task is the chief and why, this task's rank, rpc_layer and the ignored keys.
std::string DescribeTfConfig(const TfConfig& config);

}  // namespace dtlab
