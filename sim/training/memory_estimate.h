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
//   per run: the global batch gathered for the step (input values, loss, label,
//     prediction per example), the per-thread workspaces (activations of a chunk of
//     examples), and the message log of one step's collective, which holds one
//     record per message: as many as the algorithm's log_messages says
//     (sim/comm/all_reduce_algorithm.h): 2n(n-1) for ring, direct and hierarchical,
//     2n*ceil(log2 n) for halving_doubling, 2(n-1) for naive.
// It is an estimate (containers round up, the allocator has overhead), so the
// refusal uses it only to stop runs that are far out of reach.
//
// Thread safety: pure functions, except AvailableMemory, which reads /proc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"
#include "sim/comm/collectives.h"

namespace dtlab {

struct RunMemoryInput {
  std::int64_t parameter_values = 0;               // the model's P
  std::int64_t optimizer_slots = 0;                // adam 2, rmsprop 1, sgd 0 or 1
  std::int32_t replicas = 1;                       // replicas held by this process
  bool exact = false;                              // exact mode: accumulator words per replica
  bool accumulating = false;                       // gradient accumulation: one more gradient (or words) per replica
  bool central_storage = false;                    // one more copy of weights and slots on the host
  std::int64_t global_batch = 1;                   // examples gathered per step (the whole optimizer step's)
  std::int64_t example_values = 0;                 // input values of one example
  std::int64_t activation_values_per_example = 0;  // sum of the layers' outputs for one example
  std::int64_t chunk_size = 16;                    // examples per task (sim/compute/batch_runner.h)
  std::int64_t threads = 1;                        // tasks running at once
  AllReduceAlgorithm all_reduce = AllReduceAlgorithm::kRing;
};

/// Bytes, as doubles: 100,000 replicas squared does not fit an int64 of bytes.
struct MemoryEstimate {
  double per_replica_bytes = 0;  // weights, gradients, all-reduce buffer, slots, exact words
  double replicas_bytes = 0;     // per_replica_bytes x replicas
  double batch_bytes = 0;        // the gathered global batch and the workspaces
  double message_log_bytes = 0;  // one step's collective record
  double total_bytes = 0;
};

MemoryEstimate EstimateRunMemory(const RunMemoryInput& input);

/// What this process may still allocate, and where the number comes from.
struct AvailableMemory {
  double bytes = 0;
  std::string source;  // e.g. "MemAvailable in /proc/meminfo"
};

/// The smaller of MemAvailable (/proc/meminfo; else sysconf's available pages) and
/// RLIMIT_AS when it is set; nothing when neither can be read.
std::optional<AvailableMemory> AvailableMemoryForRun();

/// Ok when the estimate fits; InvalidArgument (exit 2) with the estimate, what is
/// available and how to fix it otherwise. Nothing known available: Ok.
Status CheckRunFitsInMemory(const MemoryEstimate& estimate, const RunMemoryInput& input,
                            const std::optional<AvailableMemory>& available);

/// "1.5 GiB", "320 MiB", "12 KiB", "80 B".
std::string BytesText(double bytes);

}  // namespace dtlab
