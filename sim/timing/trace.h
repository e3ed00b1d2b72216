// TraceWriter: a timeline in the Chrome trace-event JSON format, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open.
//
// The file is the "JSON Object Format" of the trace-event spec:
//
//   {"traceEvents":[
//   {"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"dtlab simulated cluster"}},
//   {"name":"thread_name","ph":"M","pid":0,"tid":0,"args":{"name":"replica 0"}},
//   {"name":"compute","cat":"compute","ph":"X","ts":0.000,"dur":1500.000,"pid":0,"tid":0,"args":{"step":0}},
//   ...
//   ],
//   "displayTimeUnit":"ms"}
//
// Every span is a complete event ("ph":"X"), every instant an "i" event with
// thread scope; all live in process 0, and each replica is one thread (tid =
// replica id) named "replica <i>" by a metadata event, so a viewer shows one
// track per replica. ts and dur are in microseconds, as the format requires.
//
// Times are rounded to whole nanoseconds when added and written as exact decimals
// with three fractional digits (1500.000 us), so the file is byte-identical for
// the same input and spans that nest in simulated time nest exactly in the file:
// a span [start, start + duration] is stored as [round(start), round(start +
// duration)] in ns, and rounding is monotone. Events are written sorted by start
// time, longer spans first on a tie (so parents precede their children); ties
// beyond that keep the order of the Add calls.
//
// Thread safety: a TraceWriter is a value; concurrent const use is safe, Add
// calls need external synchronization.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "sim/timing/cost_model.h"
#include "sim/comm/message_log.h"

namespace dtlab {

class TraceWriter {
 public:
  /// Adds a span on `replica`'s track. `args` (shown by the viewer when the span
  /// is selected) should be a JSON object; anything else is written as
  /// {"value": args}. REQUIRES: replica >= 0; finite times, duration >= 0 (a
  /// negative duration is written as 0).
  void AddSpan(std::int32_t replica, std::string name, std::string category, double start_seconds,
               double duration_seconds, nlohmann::json args = nlohmann::json::object());
  /// As AddSpan, with times already in whole nanoseconds.
  void AddSpanNanoseconds(std::int32_t replica, std::string name, std::string category, std::int64_t start_ns,
                          std::int64_t duration_ns, nlohmann::json args = nlohmann::json::object());
  /// Adds an instant event (a marker at one time) on `replica`'s track.
  /// REQUIRES: replica >= 0, at_seconds finite.
  void AddInstant(std::int32_t replica, std::string name, std::string category, double at_seconds,
                  nlohmann::json args = nlohmann::json::object());

  /// Spans and instants added so far (the metadata events are not counted).
  std::size_t num_events() const { return events_.size(); }

  /// The whole trace document (format above), one event per line. Strings that
  /// are not valid UTF-8 have their bad bytes replaced by U+FFFD.
  std::string ToJson() const;
  /// Writes ToJson() to `path`, atomically (WriteFileAtomically). IOError naming
  /// the path when it cannot be written.
  Status WriteFile(const std::string& path) const;

 private:
  struct Event {
    char phase = 'X';  // 'X' complete event, 'i' instant
    std::int32_t replica = 0;
    std::string name, category;
    std::int64_t start_ns = 0, duration_ns = 0;
    nlohmann::json args;
  };
  std::vector<Event> events_;
};

/// Lays `timeline` out on `writer`, one track per replica:
///   - each compute stage: a span "compute" (category "compute") on every replica
///     that computed in it, as long as that replica's compute;
///   - each collective: on every replica a span named after it (category
///     "collective", e.g. "all_reduce/ring"), with one child span "phase <k>"
///     (category "phase") per phase, and within each phase, on the sender's track,
///     one span "send -> <receiver>" (category "message", args bytes, receiver,
///     hops) per message, as long as its MessageCost.
/// `records` are the records the timeline's collectives were estimated from, in
/// the same order (records[i] gave timeline.collectives()[i]). InvalidArgument,
/// with nothing added to `writer`, when they do not match: a different count, or
/// a record whose name, step, replica count or message count differs from its
/// cost's, or whose message lies outside the cost's phases or replicas.
Status AddTimelineToTrace(const SimulatedTimeline& timeline, const std::vector<CollectiveRecord>& records,
                          TraceWriter& writer);

}  // namespace dtlab
