// How much memory a run of the virtual cluster needs, and whether this machine has
// it (docs/reliability.md, "Memory"). dtlab refuses a run that cannot fit before
// allocating anything, instead of allocating until std::bad_alloc.
//
// The estimate follows where the replicas allocate (sim/engines/cluster.cc Cluster::Create,
// TrainStep; sim/comm/collectives.cc; sim/comm/message_log.h):
//   per replica: weights, gradients, the packed all-reduce buffer and the optimizer
//     slots (4 bytes per parameter value each), plus exact mode's accumulator words
//     (kExactWords x 8 bytes per value), and with gradient accumulation the
//     running sum of the step's micro-batch gradients (a float or exact words per value);
//     under the folded reduction only the weights and the slots, and the gradient
//     buffers once per replica of a wave plus the sum; where exact replicas compute
//     in waves without it (compacts_in_waves), instead of the words (and their
//     running sum) each replica's encoded gradient, and one wave's words;
//   per run: the global batch gathered for the step (input values, loss, label,
//     prediction per example), the per-thread workspaces (activations of a chunk of
//     examples), and the message log of one step's collective, which holds one
//     record per message: as many as the algorithm's log_messages says
//     (sim/comm/all_reduce_algorithm.h): 2n(n-1) for ring, direct and hierarchical,
//     2n*ceil(log2 n) for halving_doubling, 2(n-1) for naive; folded, none, but
//     the cost model's record of the collective it prices once from its schedule
//     (and a copy while it is built), where one has at most kMaxPricedMessages.
// It is an estimate (containers round up, the allocator has overhead), so the
// refusal uses it only to stop runs that are far out of reach.
//
// Thread safety: pure functions, except AvailableMemory, which reads /proc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "sim/comm/collectives.h"

namespace dtlab {

struct RunMemoryInput {
  std::int64_t parameter_values = 0;  // the model's P
  std::int64_t optimizer_slots = 0;   // adam 2, rmsprop 1, sgd 0 or 1
  std::int32_t replicas = 1;          // replicas held by this process
  bool mpi_rank = false;              // the process is one MPI rank: `replicas` are its share
  bool exact = false;                 // exact mode: accumulator words per replica
  /// Exact mode's compact all-reduce (--exact-all-reduce compact): its buffers per
  /// replica.
  bool compact = false;
  /// Where the fold does not run, the replicas compute in waves of fold_wave and keep
  /// only their encoded gradients (Cluster::MayCompactGradients): from 2 replicas
  /// on, and on an MPI rank from 1 (the cluster has the other ranks' too).
  bool compacts_in_waves = false;
  bool accumulating = false;      // gradient accumulation: one more gradient (or words) per replica, not in waves
  bool central_storage = false;   // weights and slots on the host alone, not per replica
  std::int64_t global_batch = 1;  // examples gathered per step (the whole optimizer step's)
  // For LargestReplicasThatFit: examples per replica per step when the global batch
  // grows with the replicas (--batch-per-replica; 0: it is fixed), up to batch_limit.
  std::int64_t batch_per_replica = 0;
  std::int64_t batch_limit = 0;
  std::int64_t example_values = 0;                 // input values of one example
  std::int64_t activation_values_per_example = 0;  // sum of the layers' outputs for one example
  std::int64_t chunk_size = 16;                    // examples per task (sim/compute/batch_runner.h)
  std::int64_t threads = 1;                        // tasks running at once
  /// A model with BatchNormalization: a training step runs in stages, and every chunk
  /// keeps its workspace for the whole call (sim/compute/batch_runner_staged.cc): the
  /// step's, or one wave's where the replicas compute in waves.
  bool staged = false;
  /// A staged step's statistics: the largest BatchNormalization layer's words
  /// (BatchNormWords), held per chunk and per replica while that layer is summed.
  std::int64_t batch_norm_words = 0;
  AllReduceAlgorithm all_reduce = AllReduceAlgorithm::kRing;
  /// The folded reduction (Cluster::FoldsReduction) sums the gradients above this
  /// many replicas (-1: never): the replicas then hold only their weights and
  /// optimizer slots, and `fold_wave` replicas' gradient buffers exist at once.
  std::int32_t fold_above = -1;
  std::int32_t fold_wave = 16;
};

/// Bytes, as doubles: 100,000 replicas squared does not fit an int64 of bytes.
struct MemoryEstimate {
  double per_replica_bytes = 0;  // weights, gradients, all-reduce buffer, slots, exact words
  double replicas_bytes = 0;     // per_replica_bytes x replicas
  double batch_bytes = 0;        // the gathered global batch and the workspaces
  double message_log_bytes = 0;  // one step's collective record
  double total_bytes = 0;
  bool folded = false;  // the folded reduction sums the gradients (no message log; the priced schedule's record)
};

MemoryEstimate EstimateRunMemory(const RunMemoryInput& input);

/// What this process may still allocate, and where the number comes from.
struct AvailableMemory {
  double bytes = 0;
  std::string source;                 // e.g. "MemAvailable in /proc/meminfo"
  std::int32_t ranks_on_machine = 1;  // the processes sharing the machine's memory (MachineShare)
};

/// Under mpirun, the ranks of one machine share its memory (MemAvailable): `ranks`
/// of them, this one estimated at `fraction` of their estimates together.
struct MachineShare {
  std::int32_t ranks = 1;
  double fraction = 1;
};

/// The smallest of MemAvailable (/proc/meminfo; else sysconf's available pages),
/// RLIMIT_AS when it is set, and `max_memory_bytes` (--max-memory, a limit on the
/// process's peak: what it may still allocate is the limit less `resident_bytes`)
/// when it is above 0; nothing when none is known. With a `share` of several ranks,
/// the machine's memory counts at share.fraction of it: each rank's estimate then
/// fits its share exactly when their sum fits the machine. (RLIMIT_AS and
/// --max-memory limit each process alone.)
std::optional<AvailableMemory> AvailableMemoryForRun(double max_memory_bytes = 0, double resident_bytes = 0,
                                                     MachineShare share = {});

/// This machine, as the ranks that share its memory see it: a hash of the kernel's
/// boot id (/proc/sys/kernel/random/boot_id; else of the host name), equal in every
/// process of one machine, containers included.
std::uint64_t MachineKey();

/// This process's resident set now (/proc/self/statm): the data set, the code. 0 if
/// it cannot be read.
double ResidentBytes();

/// Starts a measurement of this process's peak resident set: gives the allocator's
/// free memory back to the system and resets the kernel's high-water mark (VmHWM,
/// through /proc/self/clear_refs). False where the mark cannot be reset: the peak
/// read later is then the process's since it started.
bool ResetPeakResident();
/// VmHWM of /proc/self/status: the peak resident set since the last reset, in
/// bytes; 0 if unknown.
double PeakResidentBytes();

/// The most replicas (1 .. 2^20) whose estimate fits in `available_bytes` with
/// everything else as in `input` (the global batch growing with them when
/// input.batch_per_replica is set); 0 if not even one does.
std::int32_t LargestReplicasThatFit(const RunMemoryInput& input, double available_bytes);

/// Ok when the estimate fits; InvalidArgument (exit 2) with the estimate, what is
/// available, the most replicas that fit and how to fix it otherwise. Nothing known
/// available: Ok.
Status CheckRunFitsInMemory(const MemoryEstimate& estimate, const RunMemoryInput& input,
                            const std::optional<AvailableMemory>& available);

/// "1.5 GiB", "320 MiB", "12 KiB", "80 B".
std::string BytesText(double bytes);

/// A size as a user writes it: a finite number above 0 with an optional unit, B,
/// K/M/G/T or KiB..TiB (powers of 1024), KB/MB/GB/TB (powers of 1000), e.g. "4G",
/// "512 MiB", "1.5e9". InvalidArgument naming `what` otherwise.
StatusOr<double> ParseByteSize(std::string_view text, std::string_view what);

}  // namespace dtlab
