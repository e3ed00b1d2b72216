#include "sim/timing/trace.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <set>
#include <utility>

#include "core/file_io.h"  // WriteFileAtomically

namespace dtlab {

namespace {

// Seconds to whole nanoseconds, rounding to nearest. Out-of-range values (which
// REQUIRES excludes) are clamped rather than left to llround's undefined result.
std::int64_t ToNanoseconds(double seconds) {
  const double ns = seconds * 1e9;
  if (std::isnan(ns)) return 0;
  constexpr double kLimit = 9.0e18;
  if (ns >= kLimit) return static_cast<std::int64_t>(kLimit);
  if (ns <= -kLimit) return -static_cast<std::int64_t>(kLimit);
  return std::llround(ns);
}

// Nanoseconds as exact microseconds with three decimals: 1234567 -> "1234.567".
std::string FormatMicroseconds(std::int64_t ns) {
  const bool negative = ns < 0;
  const std::uint64_t magnitude = negative ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%s%llu.%03llu", negative ? "-" : "",
                static_cast<unsigned long long>(magnitude / 1000), static_cast<unsigned long long>(magnitude % 1000));
  return buffer;
}

// A JSON string literal; invalid UTF-8 is replaced rather than thrown about.
std::string Quote(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string DumpArgs(const nlohmann::json& args) {
  const nlohmann::json object =
      args.is_object() ? args : (args.is_null() ? nlohmann::json::object() : nlohmann::json{{"value", args}});
  return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string MetadataEvent(const char* name, std::int32_t tid, const std::string& value) {
  return std::string("{\"name\":\"") + name + "\",\"ph\":\"M\",\"pid\":0,\"tid\":" + std::to_string(tid) +
         ",\"args\":{\"name\":" + Quote(value) + "}}";
}

}  // namespace

void TraceWriter::AddSpan(std::int32_t replica, std::string name, std::string category, double start_seconds,
                          double duration_seconds, nlohmann::json args) {
  // Round both ends (not the duration) so that nesting in seconds survives.
  const std::int64_t start_ns = ToNanoseconds(start_seconds);
  const std::int64_t end_ns = ToNanoseconds(start_seconds + std::max(duration_seconds, 0.0));
  AddSpanNanoseconds(replica, std::move(name), std::move(category), start_ns, end_ns - start_ns, std::move(args));
}

void TraceWriter::AddSpanNanoseconds(std::int32_t replica, std::string name, std::string category,
                                     std::int64_t start_ns, std::int64_t duration_ns, nlohmann::json args) {
  assert(replica >= 0);
  Event event;
  event.phase = 'X';
  event.replica = replica;
  event.name = std::move(name);
  event.category = std::move(category);
  event.start_ns = start_ns;
  event.duration_ns = std::max<std::int64_t>(duration_ns, 0);
  event.args = std::move(args);
  events_.push_back(std::move(event));
}

void TraceWriter::AddInstant(std::int32_t replica, std::string name, std::string category, double at_seconds,
                             nlohmann::json args) {
  assert(replica >= 0);
  Event event;
  event.phase = 'i';
  event.replica = replica;
  event.name = std::move(name);
  event.category = std::move(category);
  event.start_ns = ToNanoseconds(at_seconds);
  event.args = std::move(args);
  events_.push_back(std::move(event));
}

std::string TraceWriter::ToJson() const {
  std::vector<const Event*> sorted;
  sorted.reserve(events_.size());
  std::set<std::int32_t> replicas;
  for (const Event& event : events_) {
    sorted.push_back(&event);
    replicas.insert(event.replica);
  }
  std::stable_sort(sorted.begin(), sorted.end(), [](const Event* a, const Event* b) {
    if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
    return a->duration_ns > b->duration_ns;
  });

  std::string out = "{\"traceEvents\":[\n";
  out += MetadataEvent("process_name", 0, "dtlab simulated cluster");
  for (const std::int32_t replica : replicas) {
    out += ",\n" + MetadataEvent("thread_name", replica, "replica " + std::to_string(replica));
  }
  for (const Event* event : sorted) {
    out += ",\n{\"name\":" + Quote(event->name) + ",\"cat\":" + Quote(event->category) + ",\"ph\":\"";
    out += event->phase;
    out += "\"";
    if (event->phase == 'i') out += ",\"s\":\"t\"";
    out += ",\"ts\":" + FormatMicroseconds(event->start_ns);
    if (event->phase == 'X') out += ",\"dur\":" + FormatMicroseconds(event->duration_ns);
    out += ",\"pid\":0,\"tid\":" + std::to_string(event->replica) + ",\"args\":" + DumpArgs(event->args) + "}";
  }
  out += "\n],\n\"displayTimeUnit\":\"ms\"}\n";
  return out;
}

Status TraceWriter::WriteFile(const std::string& path) const {
  const Status status = WriteFileAtomically(path, ToJson());
  return status.ok() ? status : status.WithContext("writing trace");
}

Status AddTimelineToTrace(const SimulatedTimeline& timeline, const std::vector<CollectiveRecord>& records,
                          TraceWriter& writer) {
  const std::vector<CollectiveCost>& costs = timeline.collectives();
  const std::int32_t n = timeline.num_replicas();
  if (records.size() != costs.size()) {
    return Status::InvalidArgument("the timeline has " + std::to_string(costs.size()) + " collectives but " +
                                   std::to_string(records.size()) + " records were given");
  }
  // Check everything before adding anything, so a mismatch leaves `writer` as it was.
  for (std::size_t i = 0; i < records.size(); ++i) {
    const CollectiveRecord& record = records[i];
    const CollectiveCost& cost = costs[i];
    const std::string which =
        "collective " + std::to_string(i) + " (" + cost.name + ", step " + std::to_string(cost.step) + ")";
    if (record.name != cost.name || record.step != cost.step) {
      return Status::InvalidArgument(which + " does not match its record (" + record.name + ", step " +
                                     std::to_string(record.step) + "): records must be in AddCollective order");
    }
    if (record.num_replicas != n) {
      return Status::InvalidArgument(which + " has " + std::to_string(record.num_replicas) +
                                     " replicas but the timeline has " + std::to_string(n));
    }
    if (record.messages.size() != cost.messages.size()) {
      return Status::InvalidArgument(which + " has " + std::to_string(record.messages.size()) +
                                     " messages in its record but " + std::to_string(cost.messages.size()) +
                                     " in its cost");
    }
    for (const Message& m : record.messages) {
      if (m.phase < 0 || static_cast<std::size_t>(m.phase) >= cost.phases.size() || m.sender < 0 || m.sender >= n) {
        return Status::InvalidArgument(
            which + " has a message (phase " + std::to_string(m.phase) + ", sender " + std::to_string(m.sender) +
            ") outside its " + std::to_string(cost.phases.size()) + " phases or " + std::to_string(n) + " replicas");
      }
    }
  }

  for (const TimelineStage& stage : timeline.Layout()) {
    const std::int64_t start_ns = ToNanoseconds(stage.start_seconds);
    if (stage.kind == TimelineStage::Kind::kCompute) {
      for (std::int32_t r = 0; r < n; ++r) {
        const double seconds = stage.replica_seconds[r];
        if (seconds <= 0) continue;
        writer.AddSpanNanoseconds(r, "compute", "compute", start_ns,
                                  ToNanoseconds(stage.start_seconds + seconds) - start_ns, {{"step", stage.step}});
      }
      continue;
    }

    const CollectiveRecord& record = records[stage.collective_index];
    const CollectiveCost& cost = costs[stage.collective_index];
    // Phase boundaries in ns, from the layout's absolute times.
    std::vector<std::int64_t> boundary_ns = {start_ns};
    for (const double end : stage.phase_end_seconds) boundary_ns.push_back(ToNanoseconds(end));
    const std::vector<double> phase_start_seconds = [&] {
      std::vector<double> starts = {stage.start_seconds};
      starts.insert(starts.end(), stage.phase_end_seconds.begin(), stage.phase_end_seconds.end());
      return starts;
    }();
    // Messages of each (phase, sender), in record order.
    std::vector<std::vector<std::size_t>> by_phase_sender(cost.phases.size() * static_cast<std::size_t>(n));
    for (std::size_t m = 0; m < record.messages.size(); ++m) {
      const Message& message = record.messages[m];
      by_phase_sender[static_cast<std::size_t>(message.phase) * n + message.sender].push_back(m);
    }

    for (std::int32_t r = 0; r < n; ++r) {
      writer.AddSpanNanoseconds(r, cost.name, "collective", boundary_ns.front(),
                                boundary_ns.back() - boundary_ns.front(),
                                {{"step", cost.step},
                                 {"bytes_per_replica", record.bytes_per_replica},
                                 {"phases", cost.phases.size()},
                                 {"seconds", cost.seconds}});
      for (std::size_t k = 0; k < cost.phases.size(); ++k) {
        const PhaseCost& phase = cost.phases[k];
        writer.AddSpanNanoseconds(r, "phase " + std::to_string(k), "phase", boundary_ns[k],
                                  boundary_ns[k + 1] - boundary_ns[k],
                                  {{"phase", k},
                                   {"bytes", phase.bytes},
                                   {"max_link_bytes", phase.max_link_bytes},
                                   {"max_hops", phase.max_hops},
                                   {"messages", phase.num_messages}});
        for (const std::size_t m : by_phase_sender[k * n + r]) {
          const Message& message = record.messages[m];
          const MessageCost& message_cost = cost.messages[m];
          // The same sum as the phase end's, with a smaller or equal addend, so
          // the message's rounded end never passes its phase's.
          const std::int64_t end_ns = ToNanoseconds(phase_start_seconds[k] + message_cost.seconds);
          writer.AddSpanNanoseconds(
              r, "send -> " + std::to_string(message.receiver), "message", boundary_ns[k],
              std::min(end_ns, boundary_ns[k + 1]) - boundary_ns[k],
              {{"bytes", message.bytes}, {"receiver", message.receiver}, {"hops", message_cost.hops}});
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace dtlab
