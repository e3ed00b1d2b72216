// Tests of sim/timing/trace.h: the Chrome trace-event JSON of a simulated timeline.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/timing/cost_model.h"
#include "sim/timing/topology.h"
#include "sim/timing/trace.h"
#include "tests/unit/test_util.h"

namespace dtlab {
namespace {

using nlohmann::json;

json Parse(const std::string& text) {
  const json document = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(document.is_discarded()) << text.substr(0, 200);
  return document;
}

std::vector<json> EventsWithPhase(const json& document, const std::string& phase) {
  std::vector<json> events;
  for (const json& event : document["traceEvents"]) {
    if (event["ph"] == phase) events.push_back(event);
  }
  return events;
}

// Whole nanoseconds of a microsecond field (exact: the file has three decimals).
std::int64_t Nanoseconds(const json& microseconds) { return std::llround(microseconds.get<double>() * 1000); }

// A ring all-reduce of `bytes` on n replicas (2(n-1) phases, i -> i+1).
using ::dtlab::testing::RingAllReduceRecord;

// Two steps of: replica i computes (i+1) ms, then a ring all-reduce.
struct SimulatedRun {
  SimulatedTimeline timeline{4};
  std::vector<CollectiveRecord> records;
};
SimulatedRun MakeRun(TopologyKind kind = TopologyKind::kRing) {
  const std::int32_t n = 4;
  const StatusOr<Topology> topology = Topology::Create(kind, n);
  EXPECT_TRUE(topology.ok());
  SimulatedRun run;
  for (std::int64_t step = 0; step < 2; ++step) {
    for (std::int32_t r = 0; r < n; ++r) EXPECT_TRUE(run.timeline.AddCompute(step, r, (r + 1) * 1e-3).ok());
    run.records.push_back(RingAllReduceRecord(n, 4'000'000, step));
    const StatusOr<CollectiveCost> cost = EstimateCollective(run.records.back(), *topology);
    EXPECT_TRUE(cost.ok());
    run.timeline.AddCollective(*cost);
  }
  return run;
}

TEST(TraceWriter, WritesCompleteEventsInMicroseconds) {
  TraceWriter writer;
  writer.AddSpan(1, "compute", "compute", 1.5, 0.25, {{"step", 3}});
  writer.AddSpan(0, "send -> 1", "message", 1.234567891, 1e-9);
  writer.AddInstant(0, "checkpoint", "marker", 2.0);
  EXPECT_EQ(writer.num_events(), 3u);

  const std::string text = writer.ToJson();
  const json document = Parse(text);
  EXPECT_EQ(document["displayTimeUnit"], "ms");
  ASSERT_TRUE(document["traceEvents"].is_array());
  // process_name + 2 thread_name + 3 events.
  EXPECT_EQ(document["traceEvents"].size(), 6u);

  const std::vector<json> spans = EventsWithPhase(document, "X");
  ASSERT_EQ(spans.size(), 2u);
  // Sorted by start: the message (1.234... s) comes first.
  EXPECT_EQ(spans[0]["name"], "send -> 1");
  EXPECT_EQ(spans[0]["tid"], 0);
  EXPECT_EQ(Nanoseconds(spans[0]["ts"]), 1'234'567'891);
  EXPECT_EQ(Nanoseconds(spans[0]["dur"]), 1);
  EXPECT_EQ(spans[1]["name"], "compute");
  EXPECT_EQ(spans[1]["cat"], "compute");
  EXPECT_EQ(spans[1]["pid"], 0);
  EXPECT_EQ(spans[1]["tid"], 1);
  EXPECT_DOUBLE_EQ(spans[1]["ts"].get<double>(), 1.5e6);  // microseconds
  EXPECT_DOUBLE_EQ(spans[1]["dur"].get<double>(), 0.25e6);
  EXPECT_EQ(spans[1]["args"]["step"], 3);
  // Exact decimals in the text.
  EXPECT_NE(text.find("\"ts\":1234567.891,\"dur\":0.001"), std::string::npos) << text;
  EXPECT_NE(text.find("\"ts\":1500000.000,\"dur\":250000.000"), std::string::npos) << text;

  const std::vector<json> instants = EventsWithPhase(document, "i");
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(instants[0]["s"], "t");
  EXPECT_DOUBLE_EQ(instants[0]["ts"].get<double>(), 2e6);

  std::map<int, std::string> thread_names;
  for (const json& event : EventsWithPhase(document, "M")) {
    if (event["name"] == "thread_name") thread_names[event["tid"].get<int>()] = event["args"]["name"];
  }
  EXPECT_EQ(thread_names, (std::map<int, std::string>{{0, "replica 0"}, {1, "replica 1"}}));
}

TEST(TraceWriter, EscapesStringsAndToleratesBadUtf8) {
  TraceWriter writer;
  writer.AddSpan(0, "a \"quoted\"\nname", "cat\\egory", 0, 1, {{"note", "tab\there"}});
  writer.AddSpan(0, std::string("bad \xff byte"), "c", 0, 1, json(42));
  const json document = Parse(writer.ToJson());
  const std::vector<json> spans = EventsWithPhase(document, "X");
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0]["name"], "a \"quoted\"\nname");
  EXPECT_EQ(spans[0]["cat"], "cat\\egory");
  EXPECT_EQ(spans[0]["args"]["note"], "tab\there");
  EXPECT_EQ(spans[1]["args"]["value"], 42);  // non-object args are wrapped
}

TEST(TraceWriter, ParentsPrecedeChildrenThatStartWithThem) {
  TraceWriter writer;
  writer.AddSpan(0, "child", "c", 1.0, 0.5);
  writer.AddSpan(0, "parent", "c", 1.0, 2.0);
  const std::vector<json> spans = EventsWithPhase(Parse(writer.ToJson()), "X");
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0]["name"], "parent");
  EXPECT_EQ(spans[1]["name"], "child");
}

TEST(AddTimelineToTrace, OneTrackPerReplicaWithComputePhasesAndMessages) {
  const SimulatedRun run = MakeRun();
  TraceWriter writer;
  ASSERT_TRUE(AddTimelineToTrace(run.timeline, run.records, writer).ok());
  const json document = Parse(writer.ToJson());

  // Per step: 4 compute + 4 collective + 4 x 6 phase + 24 message spans.
  const std::size_t per_step = 4 + 4 + 4 * 6 + 4 * 6;
  EXPECT_EQ(writer.num_events(), 2 * per_step);
  const std::vector<json> spans = EventsWithPhase(document, "X");
  EXPECT_EQ(spans.size(), 2 * per_step);
  std::set<int> tracks;
  for (const json& event : EventsWithPhase(document, "M")) {
    if (event["name"] == "thread_name") {
      tracks.insert(event["tid"].get<int>());
      EXPECT_EQ(event["args"]["name"], "replica " + std::to_string(event["tid"].get<int>()));
    }
  }
  EXPECT_EQ(tracks, (std::set<int>{0, 1, 2, 3}));

  std::map<std::string, int> count_by_category;
  for (const json& span : spans) {
    count_by_category[span["cat"].get<std::string>()]++;
    EXPECT_EQ(span["pid"], 0);
    if (span["cat"] == "message") {
      const int sender = span["tid"].get<int>();
      EXPECT_EQ(span["name"], "send -> " + std::to_string((sender + 1) % 4));
      EXPECT_EQ(span["args"]["bytes"], 1'000'000);
      EXPECT_EQ(span["args"]["hops"], 1);
    }
  }
  EXPECT_EQ(count_by_category,
            (std::map<std::string, int>{{"collective", 8}, {"compute", 8}, {"message", 48}, {"phase", 48}}));

  // The first collective starts when the slowest replica (4 ms) is done, and the
  // trace ends where the timeline does.
  std::int64_t first_collective_ns = INT64_MAX, last_end_ns = 0;
  for (const json& span : spans) {
    if (span["cat"] == "collective") first_collective_ns = std::min(first_collective_ns, Nanoseconds(span["ts"]));
    last_end_ns = std::max(last_end_ns, Nanoseconds(span["ts"]) + Nanoseconds(span["dur"]));
  }
  EXPECT_EQ(first_collective_ns, 4'000'000);
  EXPECT_EQ(last_end_ns, std::llround(run.timeline.total_seconds() * 1e9));
}

// On each track, spans nest properly: a span that starts inside another ends
// inside it too (what Perfetto needs to stack them).
TEST(AddTimelineToTrace, SpansNestOnEveryTrack) {
  for (const TopologyKind kind : {TopologyKind::kRing, TopologyKind::kSwitch, TopologyKind::kTorus2D}) {
    const SimulatedRun run = MakeRun(kind);
    TraceWriter writer;
    ASSERT_TRUE(AddTimelineToTrace(run.timeline, run.records, writer).ok());
    std::map<int, std::vector<std::int64_t>> open_ends;  // per track, a stack of end times
    for (const json& span : EventsWithPhase(Parse(writer.ToJson()), "X")) {
      const std::int64_t start = Nanoseconds(span["ts"]), end = start + Nanoseconds(span["dur"]);
      std::vector<std::int64_t>& stack = open_ends[span["tid"].get<int>()];
      while (!stack.empty() && stack.back() <= start) stack.pop_back();
      if (!stack.empty()) {
        EXPECT_LE(end, stack.back()) << span.dump();
      }
      stack.push_back(end);
    }
  }
}

TEST(AddTimelineToTrace, IsDeterministic) {
  const SimulatedRun a = MakeRun(), b = MakeRun();
  TraceWriter first, second;
  ASSERT_TRUE(AddTimelineToTrace(a.timeline, a.records, first).ok());
  ASSERT_TRUE(AddTimelineToTrace(b.timeline, b.records, second).ok());
  EXPECT_EQ(first.ToJson(), second.ToJson());
  EXPECT_EQ(first.ToJson(), first.ToJson());
}

TEST(AddTimelineToTrace, RejectsRecordsThatDoNotMatch) {
  const SimulatedRun run = MakeRun();
  TraceWriter writer;
  std::vector<CollectiveRecord> records = run.records;
  records.pop_back();
  EXPECT_EQ(AddTimelineToTrace(run.timeline, records, writer).code(), Status::Code::kInvalidArgument);

  records = run.records;
  std::swap(records[0], records[1]);  // wrong order: steps differ
  const Status swapped = AddTimelineToTrace(run.timeline, records, writer);
  EXPECT_EQ(swapped.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(swapped.message().find("AddCollective order"), std::string::npos) << swapped.message();

  records = run.records;
  records[1].messages.pop_back();
  EXPECT_EQ(AddTimelineToTrace(run.timeline, records, writer).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(writer.num_events(), 0u);  // nothing added on failure
}

TEST(TraceWriter, WriteFileWritesTheDocument) {
  const SimulatedRun run = MakeRun();
  TraceWriter writer;
  ASSERT_TRUE(AddTimelineToTrace(run.timeline, run.records, writer).ok());
  const std::filesystem::path dir = testing::FreshTestDirectory();
  const std::string path = (dir / "trace.json").string();
  ASSERT_TRUE(writer.WriteFile(path).ok());
  EXPECT_EQ(testing::ReadFileBytes(path), writer.ToJson());

  const Status missing = writer.WriteFile((dir / "no" / "such" / "dir" / "trace.json").string());
  EXPECT_EQ(missing.code(), Status::Code::kIOError);
}

}  // namespace
}  // namespace dtlab
