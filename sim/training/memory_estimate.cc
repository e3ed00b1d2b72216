#include "sim/training/memory_estimate.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/exact_words.h"

namespace dtlab {

MemoryEstimate EstimateRunMemory(const RunMemoryInput& in) {
  const double p = static_cast<double>(std::max<std::int64_t>(in.parameter_values, 0));
  const double n = static_cast<double>(std::max<std::int32_t>(in.replicas, 1));
  const double f = sizeof(float);
  MemoryEstimate e;
  // weights, gradients, the packed collective buffer, the optimizer slots.
  e.per_replica_bytes = p * f * (3.0 + static_cast<double>(in.optimizer_slots));
  if (in.exact) e.per_replica_bytes += p * kExactWords * sizeof(std::int64_t);
  if (in.accumulating) e.per_replica_bytes += in.exact ? p * kExactWords * sizeof(std::int64_t) : p * f;
  e.replicas_bytes = e.per_replica_bytes * n;
  if (in.central_storage) e.replicas_bytes += p * f * (1.0 + static_cast<double>(in.optimizer_slots));
  // The gathered batch: inputs, and per example a loss, a coefficient, a label, a prediction.
  const double batch = static_cast<double>(std::max<std::int64_t>(in.global_batch, 0));
  e.batch_bytes = batch * (static_cast<double>(in.example_values) * f + 4 * 8.0);
  // Workspaces: activations and their gradients for a chunk, per running task.
  e.batch_bytes += 2.0 * static_cast<double>(in.activation_values_per_example) * f *
                   static_cast<double>(std::max<std::int64_t>(in.chunk_size, 1)) *
                   static_cast<double>(std::max<std::int64_t>(in.threads, 1));
  const double messages = in.all_reduce.info().log_messages(n);
  e.message_log_bytes = messages * sizeof(Message);
  e.total_bytes = e.replicas_bytes + e.batch_bytes + e.message_log_bytes;
  return e;
}

std::optional<AvailableMemory> AvailableMemoryForRun() {
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
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const double bytes = static_cast<double>(limit.rlim_cur);
    if (!best || bytes < best->bytes) best = AvailableMemory{bytes, "the address-space limit (ulimit -v, RLIMIT_AS)"};
  }
  return best;
}

std::string BytesText(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 6) bytes /= 1024.0, ++u;
  char text[48];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return text;
}

Status CheckRunFitsInMemory(const MemoryEstimate& e, const RunMemoryInput& in,
                            const std::optional<AvailableMemory>& available) {
  if (!available || e.total_bytes <= available->bytes) return Status::Ok();
  return Status::InvalidArgument(
      "the run needs about " + BytesText(e.total_bytes) + " of memory (" + std::to_string(in.replicas) +
      " replicas x " + BytesText(e.per_replica_bytes) +
      " of weights, gradients, all-reduce buffer and optimizer "
      "slots" +
      (in.exact ? " and exact-mode accumulators" : "") + ", " + BytesText(e.batch_bytes) + " for a step's batch (" +
      std::to_string(in.global_batch) + " examples) and the workspaces, " + BytesText(e.message_log_bytes) +
      " for one step's message log), but only " + BytesText(available->bytes) + " is available (" + available->source +
      "); use fewer --replicas, a smaller batch, or the tree or naive "
      "all-reduce (docs/reliability.md, \"Memory\")");
}

}  // namespace dtlab
