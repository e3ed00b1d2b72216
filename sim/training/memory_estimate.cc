#include "sim/training/memory_estimate.h"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "core/exact_words.h"
#include "core/text.h"
#include "sim/comm/compact_exact.h"

namespace dtlab {

MemoryEstimate EstimateRunMemory(const RunMemoryInput& in) {
  const double p = static_cast<double>(std::max<std::int64_t>(in.parameter_values, 0));
  const double n = static_cast<double>(std::max<std::int32_t>(in.replicas, 1));
  const double f = sizeof(float);
  MemoryEstimate e;
  const double words = in.exact ? p * kExactWords * sizeof(std::int64_t) : 0.0;
  const bool folded = in.fold_above >= 0 && in.replicas > in.fold_above;
  // Exact mode's compact all-reduce (sim/comm/compact_exact.h), where a step sends
  // one: per replica the encoded gradient (CompactGradient: a 16-byte window per
  // value, a 2-byte bound and two 4-byte masks per block), round 2's fields to send
  // (a 7-byte field per value; on an MPI rank, an int64 per value of a piece of at
  // most kCompactScatterPiece, reduce-scattered, and an int64 header per block) and a
  // float per block.
  const bool compact_all_reduce = in.exact && in.compact && !in.central_storage && (in.replicas > 1 || in.mpi_rank);
  const double field_bytes =
      in.mpi_rank ? 8.0 * std::min(p, static_cast<double>(kCompactScatterPiece)) + 8.0 * p / kCompactBlock : 7.0 * p;
  const double compact_bytes = p * (16.0 + (2.0 + 4.0 + 4.0 + 4.0) / kCompactBlock) + field_bytes;
  // Cluster::CompactsGradients: exact replicas in waves, below the fold.
  const bool compacted = !folded && compact_all_reduce && in.compacts_in_waves;
  // Folded or compacted, the replicas compute in waves of fold_wave (at most n).
  const bool waves = folded || compacted;
  const double wave = waves ? std::min(n, static_cast<double>(std::max(in.fold_wave, 1))) : n;
  e.folded = folded;
  // The variables and optimizer slots of a replica: its own copy, or, with
  // central_storage, none (the host's one copy, below).
  const double variables = in.central_storage ? 0.0 : p * f * (1.0 + static_cast<double>(in.optimizer_slots));
  if (folded) {
    // weights and slots per replica; a wave's gradients (fast mode) or words (exact),
    // and the sum (packed, unpacked and exact mode's words).
    e.per_replica_bytes = variables;
    e.replicas_bytes = e.per_replica_bytes * n + wave * (in.exact ? words : p * f) + 2.0 * p * f + words;
  } else if (compacted) {
    // Cluster::CompactsGradients: weights, the reduced gradient (packed and unpacked),
    // the optimizer slots and the compact all-reduce's bytes; a wave's words in the
    // slots.
    e.per_replica_bytes = variables + 2.0 * p * f + compact_bytes;
    e.replicas_bytes = e.per_replica_bytes * n + wave * words;
  } else {
    // weights and optimizer slots, gradients, the packed collective buffer.
    e.per_replica_bytes = variables + 2.0 * p * f + words;
    if (in.accumulating) e.per_replica_bytes += in.exact ? words : p * f;
    if (compact_all_reduce) e.per_replica_bytes += compact_bytes;  // encoded from the words
    e.replicas_bytes = e.per_replica_bytes * n;
  }
  if (in.central_storage) e.replicas_bytes += p * f * (1.0 + static_cast<double>(in.optimizer_slots));
  // The gathered batch: inputs, and per example a loss, a coefficient, a label, a prediction.
  const double batch = static_cast<double>(std::max<std::int64_t>(in.global_batch, 0));
  e.batch_bytes = batch * (static_cast<double>(in.example_values) * f + 4 * 8.0);
  // Workspaces: activations and their gradients for a chunk, per running task; in a
  // staged step (BatchNormalization), for every example of a call's passes: the
  // step's, or a wave's where the replicas compute in waves.
  const double workspace_examples = static_cast<double>(std::max<std::int64_t>(in.chunk_size, 1)) *
                                    static_cast<double>(std::max<std::int64_t>(in.threads, 1));
  const double per_replica =
      in.batch_per_replica > 0 ? static_cast<double>(in.batch_per_replica) : std::ceil(batch / n);
  const double staged_examples = waves ? std::min(batch, wave * per_replica) : batch;
  e.batch_bytes += 2.0 * static_cast<double>(in.activation_values_per_example) * f *
                   (in.staged ? std::max(workspace_examples, staged_examples) : workspace_examples);
  if (in.staged) {  // the statistics' words: per chunk (at most one per replica more than a full split) and replica
    const double chunks =
        std::ceil(staged_examples / static_cast<double>(std::max<std::int64_t>(in.chunk_size, 1))) + wave;
    e.batch_bytes += static_cast<double>(in.batch_norm_words) * sizeof(std::int64_t) * (chunks + wave);
  }
  // The compact all-reduce's two rounds: two collectives' messages. A folded step
  // sends none, but the cost model prices the collectives the run names once, from
  // their schedules (sim/training/run_timing.cc), where one logs at most
  // kMaxPricedMessages: their records, and a copy of the last while it is built
  // (RecordSchedule returns its log's record).
  const double rounds = compact_all_reduce ? 2.0 : 1.0;
  const double collective_messages = in.all_reduce.info().log_messages(n);
  const double messages = !folded                                     ? rounds * collective_messages
                          : collective_messages <= kMaxPricedMessages ? (rounds + 1.0) * collective_messages
                                                                      : 0.0;
  e.message_log_bytes = messages * sizeof(Message);
  e.total_bytes = e.replicas_bytes + e.batch_bytes + e.message_log_bytes;
  return e;
}

double ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  double size = 0, resident = 0;
  const long page = sysconf(_SC_PAGESIZE);
  if (!(statm >> size >> resident) || page <= 0) return 0;
  return resident * static_cast<double>(page);
}

bool ResetPeakResident() {
  malloc_trim(0);  // what earlier runs freed goes back to the system, out of the resident set
  std::ofstream clear_refs("/proc/self/clear_refs");
  clear_refs << "5";  // resets VmHWM to the current resident set (Linux 4.0 and later)
  clear_refs.close();
  return clear_refs.good();
}

double PeakResidentBytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    double kib = 0;
    return fields >> kib ? kib * 1024.0 : 0.0;
  }
  return 0;
}

std::int32_t LargestReplicasThatFit(const RunMemoryInput& input, double available_bytes) {
  RunMemoryInput trial = input;
  auto fits = [&](std::int32_t replicas) {
    trial.replicas = replicas;
    if (input.batch_per_replica > 0)
      trial.global_batch = std::min(input.batch_per_replica * replicas, std::max(input.batch_limit, std::int64_t{1}));
    return EstimateRunMemory(trial).total_bytes <= available_bytes;
  };
  // The estimate grows with the replicas, except where the folded reduction takes
  // over (it drops there): the largest count that fits in [low, high], given fits(low).
  auto largest = [&](std::int32_t low, std::int32_t high) {
    while (low < high) {
      const std::int32_t middle = low + (high - low + 1) / 2;
      if (fits(middle))
        low = middle;
      else
        high = middle - 1;
    }
    return low;
  };
  constexpr std::int32_t kMost = 1 << 20;
  if (input.fold_above >= 0 && input.fold_above < kMost && fits(input.fold_above + 1))
    return largest(input.fold_above + 1, kMost);
  if (!fits(1)) return 0;
  return largest(1, input.fold_above >= 1 ? std::min(input.fold_above, kMost) : kMost);
}

std::optional<AvailableMemory> AvailableMemoryForRun(double max_memory_bytes, double resident_bytes,
                                                     MachineShare share) {
  std::optional<AvailableMemory> best;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    std::istringstream fields(line);
    std::string key;
    double kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:")
      best = AvailableMemory{kib * 1024.0, "MemAvailable in /proc/meminfo"};
  }
  if (!best) {
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
      best =
          AvailableMemory{static_cast<double>(pages) * static_cast<double>(page), "available physical pages (sysconf)"};
  }
  if (best && share.ranks > 1) {
    const double fraction = std::clamp(share.fraction, 0.0, 1.0);
    best->source += ": " + BytesText(best->bytes) + " for the " + std::to_string(share.ranks) +
                    " ranks on this machine, this rank's share";
    best->bytes *= fraction;
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const double bytes = static_cast<double>(limit.rlim_cur);
    if (!best || bytes < best->bytes) best = AvailableMemory{bytes, "the address-space limit (ulimit -v, RLIMIT_AS)"};
  }
  if (max_memory_bytes > 0) {
    const double bytes = std::max(max_memory_bytes - resident_bytes, 0.0);
    if (!best || bytes < best->bytes)
      best = AvailableMemory{bytes, "--max-memory " + BytesText(max_memory_bytes) + " less the " +
                                        BytesText(resident_bytes) + " this process already holds"};
  }
  if (best) best->ranks_on_machine = std::max(share.ranks, 1);
  return best;
}

std::uint64_t MachineKey() {
  // The kernel's boot id: one per running kernel, so containers of one host (which
  // share its memory, each with a host name of its own) have the same; else the host
  // name.
  std::string key;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> key;
  if (key.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) key = std::string("host ") + host;
  }
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a
  for (const char c : key) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string BytesText(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 6) bytes /= 1024.0, ++u;
  char text[48];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return text;
}

StatusOr<double> ParseByteSize(std::string_view text, std::string_view what) {
  const std::string written(text);
  auto refuse = [&] {
    // Appended, not "'" + std::string: GCC 12 warns about that (-Wrestrict, a false positive).
    std::string message(what);
    message.append(" must be a size above 0 such as 4G, 512M or 1.5GiB (units B, K, M, G, T, KiB..TiB, KB..TB), got '")
        .append(EscapeControl(written.substr(0, 40)))
        .append("'");
    return Status::InvalidArgument(message);
  };
  // A decimal number (not inf, nan or hexadecimal), then the unit.
  if (written.empty() || !(std::isdigit(static_cast<unsigned char>(written[0])) || written[0] == '.') ||
      (written.size() > 1 && (written[1] == 'x' || written[1] == 'X')))
    return refuse();
  char* parsed_end = nullptr;
  const double value = std::strtod(written.c_str(), &parsed_end);
  if (parsed_end == written.c_str() || !std::isfinite(value) || !(value > 0)) return refuse();
  const auto end = static_cast<std::size_t>(parsed_end - written.c_str());
  std::string unit = written.substr(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},         {"B", 1},        {"K", 0x1p10},   {"M", 0x1p20}, {"G", 0x1p30}, {"T", 0x1p40}, {"KiB", 0x1p10},
      {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40}, {"KB", 1e3},   {"MB", 1e6},   {"GB", 1e9},   {"TB", 1e12}};
  for (const auto& [name, factor] : kUnits)
    if (unit == name) {
      const double bytes = value * factor;
      if (!std::isfinite(bytes) || bytes > 0x1p60) return refuse();
      return bytes;
    }
  return refuse();
}

namespace {

std::string FitText(const RunMemoryInput& in, double available_bytes) {
  const std::int32_t most = LargestReplicasThatFit(in, available_bytes);
  if (most == 0) return "not even 1 replica fits; ";
  return "at most " + std::to_string(most) + " replica" + (most == 1 ? "" : "s") + (in.mpi_rank ? " a rank" : "") +
         " would fit; ";
}

}  // namespace

Status CheckRunFitsInMemory(const MemoryEstimate& e, const RunMemoryInput& in,
                            const std::optional<AvailableMemory>& available) {
  if (!available || e.total_bytes <= available->bytes) return Status::Ok();
  return Status::InvalidArgument(
      "the run needs about " + BytesText(e.total_bytes) + " of memory (" + std::to_string(in.replicas) + " replicas" +
      (in.mpi_rank ? " on this rank" : "") + " x " + BytesText(e.per_replica_bytes) +
      " of weights, gradients, all-reduce buffer and optimizer "
      "slots" +
      (in.exact ? " and exact-mode accumulators" : "") + ", " + BytesText(e.batch_bytes) + " for a step's batch (" +
      std::to_string(in.global_batch) + " examples) and the workspaces, " + BytesText(e.message_log_bytes) +
      " for one step's message log), but only " + BytesText(available->bytes) + " is available (" + available->source +
      "); " + FitText(in, available->bytes) +
      (in.mpi_rank ? "use fewer --replicas-per-worker or fewer ranks a machine" : "use fewer --replicas") +
      ", a smaller batch, or the tree or naive all-reduce (docs/reliability.md, \"Memory\")");
}

}  // namespace dtlab
