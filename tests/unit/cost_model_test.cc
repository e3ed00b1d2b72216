// Tests of sim/timing/topology.h and sim/timing/cost_model.h. CollectiveRecords are built by
// hand, so these tests do not depend on the collectives' implementation.
#include <gtest/gtest.h>

#include "tests/unit/test_util.h"

#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim/timing/cost_model.h"
#include "sim/timing/topology.h"

namespace dtlab {
namespace {

Topology MakeTopology(TopologyKind kind, std::int32_t n, LinkParameters link = {}, std::int32_t rows = 0) {
  StatusOr<Topology> topology = Topology::Create(kind, n, link, rows);
  EXPECT_TRUE(topology.ok()) << topology.status().ToString();
  return std::move(topology).value();
}

// The nodes a route visits, sender first.
std::vector<std::int32_t> RouteNodes(const Topology& topology, std::int32_t sender, std::int32_t receiver) {
  std::vector<std::int32_t> nodes = {sender};
  for (const LinkId id : topology.Route(sender, receiver)) {
    const Link link = topology.link(id);
    EXPECT_EQ(link.from, nodes.back()) << "route is not a path";
    nodes.push_back(link.to);
  }
  return nodes;
}

std::int32_t RingDistance(std::int32_t a, std::int32_t b, std::int32_t size) {
  const std::int32_t forward = ((b - a) % size + size) % size;
  return std::min(forward, size - forward);
}

// The messages of a ring all-reduce of `bytes` (divisible by n) on n replicas:
using ::dtlab::testing::RingAllReduceRecord;

// One phase in which every replica sends `bytes` to every other replica.
CollectiveRecord AllToAllRecord(std::int32_t n, std::int64_t bytes) {
  CollectiveRecord record;
  record.name = "all_to_all";
  record.num_replicas = n;
  record.num_phases = 1;
  for (std::int32_t s = 0; s < n; ++s) {
    for (std::int32_t r = 0; r < n; ++r) {
      if (r != s) record.messages.push_back({0, s, r, bytes});
    }
  }
  return record;
}

CollectiveCost Estimate(const CollectiveRecord& record, const Topology& topology) {
  StatusOr<CollectiveCost> cost = EstimateCollective(record, topology);
  EXPECT_TRUE(cost.ok()) << cost.status().ToString();
  return std::move(cost).value();
}

void ExpectRelativelyNear(double actual, double expected, double tolerance) {
  EXPECT_LE(std::abs(actual - expected), tolerance * std::abs(expected)) << actual << " vs " << expected;
}

TEST(TopologyKind, ParsesAndNamesEveryKind) {
  for (const TopologyKind kind :
       {TopologyKind::kFullyConnected, TopologyKind::kRing, TopologyKind::kSwitch, TopologyKind::kTorus2D}) {
    StatusOr<TopologyKind> parsed = ParseTopologyKind(TopologyKindName(kind));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_EQ(TopologyKindName(TopologyKind::kTorus2D), "torus2d");
  const StatusOr<TopologyKind> bad = ParseTopologyKind("mesh");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("fully_connected, ring, switch, torus2d"), std::string::npos)
      << bad.status().message();
}

TEST(Topology, RejectsBadInputs) {
  const auto code = [](TopologyKind kind, std::int32_t n, LinkParameters link, std::int32_t rows) {
    return Topology::Create(kind, n, link, rows).status().code();
  };
  const LinkParameters ok;
  EXPECT_EQ(code(TopologyKind::kRing, 0, ok, 0), Status::Code::kInvalidArgument);
  EXPECT_EQ(code(TopologyKind::kSwitch, -3, ok, 0), Status::Code::kInvalidArgument);
  EXPECT_EQ(code(TopologyKind::kTorus2D, 12, ok, 5), Status::Code::kInvalidArgument);
  EXPECT_EQ(code(TopologyKind::kTorus2D, 12, ok, -1), Status::Code::kInvalidArgument);
  EXPECT_EQ(code(TopologyKind::kRing, 4, {5e-6, 0}, 0), Status::Code::kInvalidArgument);
  EXPECT_EQ(code(TopologyKind::kRing, 4, {5e-6, -1e9}, 0), Status::Code::kInvalidArgument);
  EXPECT_EQ(code(TopologyKind::kRing, 4, {5e-6, NAN}, 0), Status::Code::kInvalidArgument);
  EXPECT_EQ(code(TopologyKind::kRing, 4, {5e-6, INFINITY}, 0), Status::Code::kInvalidArgument);
  EXPECT_EQ(code(TopologyKind::kRing, 4, {-1e-6, 1e9}, 0), Status::Code::kInvalidArgument);
  EXPECT_EQ(code(TopologyKind::kRing, 4, {NAN, 1e9}, 0), Status::Code::kInvalidArgument);
  EXPECT_EQ(code(TopologyKind::kFullyConnected, Topology::kMaxFullyConnectedReplicas + 1, ok, 0),
            Status::Code::kInvalidArgument);
  // The messages say what was wrong.
  EXPECT_NE(Topology::Create(TopologyKind::kTorus2D, 12, ok, 5).status().message().find("must divide"),
            std::string::npos);
  EXPECT_NE(Topology::Create(TopologyKind::kRing, 4, {5e-6, 0}).status().message().find("bandwidth"),
            std::string::npos);
  // Zero latency is allowed; torus_rows is ignored by the other kinds.
  EXPECT_TRUE(Topology::Create(TopologyKind::kRing, 4, {0, 1e9}).ok());
  EXPECT_TRUE(Topology::Create(TopologyKind::kRing, 4, ok, 3).ok());
}

TEST(Topology, TorusPicksTheMostSquareGrid) {
  const std::vector<std::pair<std::int32_t, std::pair<std::int32_t, std::int32_t>>> cases = {
      {16, {4, 4}}, {8, {2, 4}}, {12, {3, 4}}, {7, {1, 7}}, {1, {1, 1}}, {36, {6, 6}}};
  for (const auto& [n, grid] : cases) {
    const Topology torus = MakeTopology(TopologyKind::kTorus2D, n);
    EXPECT_EQ(torus.rows(), grid.first) << n;
    EXPECT_EQ(torus.cols(), grid.second) << n;
  }
  const Topology explicit_rows = MakeTopology(TopologyKind::kTorus2D, 12, {}, 2);
  EXPECT_EQ(explicit_rows.rows(), 2);
  EXPECT_EQ(explicit_rows.cols(), 6);
  EXPECT_EQ(explicit_rows.Describe(), "torus2d 2x6 of 12 replicas; links 5 us, 25 GB/s");
}

TEST(Topology, RingTakesTheShorterDirection) {
  const Topology ring = MakeTopology(TopologyKind::kRing, 8);
  EXPECT_EQ(ring.num_links(), 16);
  // 0 -> 5 is 3 hops counter-clockwise.
  EXPECT_EQ(RouteNodes(ring, 0, 5), (std::vector<std::int32_t>{0, 7, 6, 5}));
  // A tie (4 either way) goes clockwise.
  EXPECT_EQ(RouteNodes(ring, 0, 4), (std::vector<std::int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(RouteNodes(ring, 6, 1), (std::vector<std::int32_t>{6, 7, 0, 1}));
  EXPECT_TRUE(ring.Route(3, 3).empty());
  // Opposite directions of one cable are different links.
  EXPECT_NE(ring.Route(0, 1), ring.Route(1, 0));
  EXPECT_EQ(ring.LinkName(ring.Route(0, 5).front()), "0->7");

  const Topology two = MakeTopology(TopologyKind::kRing, 2);
  EXPECT_EQ(two.num_links(), 2);
  EXPECT_EQ(RouteNodes(two, 0, 1), (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(RouteNodes(two, 1, 0), (std::vector<std::int32_t>{1, 0}));
  EXPECT_EQ(MakeTopology(TopologyKind::kRing, 1).num_links(), 0);
}

TEST(Topology, TorusRoutesXThenYWithWraparound) {
  const Topology torus = MakeTopology(TopologyKind::kTorus2D, 16);
  ASSERT_EQ(torus.rows(), 4);
  // (0,0) -> (2,3): 1 hop X the short way round (column 0 -> 3), then 2 hops Y.
  EXPECT_EQ(RouteNodes(torus, 0, 2 * 4 + 3), (std::vector<std::int32_t>{0, 3, 7, 11}));
  EXPECT_EQ(torus.Route(0, 11).size(), 3u);
  // (1,1) -> (3,2): X +1, then Y +2 (a tie, increasing direction).
  EXPECT_EQ(RouteNodes(torus, 5, 14), (std::vector<std::int32_t>{5, 6, 10, 14}));
}

// Every route on every topology is a path from sender to receiver of the
// documented length, over valid link ids.
TEST(Topology, RoutesAreShortestPathsOfTheDocumentedLength) {
  struct Case {
    TopologyKind kind;
    std::int32_t n, rows;
  };
  for (const Case& c :
       {Case{TopologyKind::kFullyConnected, 5, 0}, Case{TopologyKind::kSwitch, 6, 0}, Case{TopologyKind::kRing, 7, 0},
        Case{TopologyKind::kRing, 2, 0}, Case{TopologyKind::kTorus2D, 12, 3}, Case{TopologyKind::kTorus2D, 8, 2},
        Case{TopologyKind::kTorus2D, 10, 5}, Case{TopologyKind::kTorus2D, 9, 3}}) {
    const Topology topology = MakeTopology(c.kind, c.n, {}, c.rows);
    SCOPED_TRACE(topology.Describe());
    std::set<LinkId> used;
    for (std::int32_t s = 0; s < c.n; ++s) {
      for (std::int32_t r = 0; r < c.n; ++r) {
        const std::vector<LinkId> route = topology.Route(s, r);
        for (const LinkId id : route) {
          ASSERT_GE(id, 0);
          ASSERT_LT(id, topology.num_links());
          used.insert(id);
        }
        const std::vector<std::int32_t> nodes = RouteNodes(topology, s, r);
        EXPECT_EQ(nodes.back(), r);
        std::size_t expected = 0;
        if (s != r) {
          switch (c.kind) {
            case TopologyKind::kFullyConnected:
              expected = 1;
              break;
            case TopologyKind::kSwitch:
              expected = 2;
              break;
            case TopologyKind::kRing:
              expected = RingDistance(s, r, c.n);
              break;
            case TopologyKind::kTorus2D:
              expected = RingDistance(s % topology.cols(), r % topology.cols(), topology.cols()) +
                         RingDistance(s / topology.cols(), r / topology.cols(), topology.rows());
              break;
          }
        }
        EXPECT_EQ(route.size(), expected) << s << " -> " << r;
      }
    }
    // Every link is used by some route (no dead links are counted).
    EXPECT_EQ(used.size(), static_cast<std::size_t>(topology.num_links()));
  }
}

TEST(Topology, FullyConnectedAndSwitchLinks) {
  const Topology full = MakeTopology(TopologyKind::kFullyConnected, 4);
  EXPECT_EQ(full.num_links(), 12);
  std::set<LinkId> links;
  for (std::int32_t s = 0; s < 4; ++s) {
    for (std::int32_t r = 0; r < 4; ++r) {
      if (s == r) continue;
      const std::vector<LinkId> route = full.Route(s, r);
      ASSERT_EQ(route.size(), 1u);
      EXPECT_EQ(full.LinkName(route[0]), std::to_string(s) + "->" + std::to_string(r));
      links.insert(route[0]);
    }
  }
  EXPECT_EQ(links.size(), 12u);  // one dedicated link per ordered pair

  const Topology star = MakeTopology(TopologyKind::kSwitch, 4);
  EXPECT_EQ(star.num_links(), 8);
  const std::vector<LinkId> route = star.Route(1, 3);
  ASSERT_EQ(route.size(), 2u);
  EXPECT_EQ(star.LinkName(route[0]), "1->switch");
  EXPECT_EQ(star.LinkName(route[1]), "switch->3");
}

TEST(CostModel, TwoMessagesOnOneLinkTakeTwiceAsLong) {
  const Topology ring = MakeTopology(TopologyKind::kRing, 4, {0.0, 1e9});
  CollectiveRecord one;
  one.name = "test";
  one.num_replicas = 4;
  one.num_phases = 1;
  one.messages = {{0, 0, 1, 1000}};
  CollectiveRecord two = one;
  two.messages.push_back({0, 0, 1, 1000});
  EXPECT_DOUBLE_EQ(Estimate(one, ring).seconds, 1e-6);
  EXPECT_DOUBLE_EQ(Estimate(two, ring).seconds, 2e-6);
  // 0 -> 2 (clockwise 0,1,2) shares link 0->1 with 0 -> 1.
  CollectiveRecord sharing = one;
  sharing.messages.push_back({0, 0, 2, 1000});
  const CollectiveCost shared = Estimate(sharing, ring);
  EXPECT_DOUBLE_EQ(shared.seconds, 2e-6);
  EXPECT_EQ(shared.phases[0].max_link_bytes, 2000);
  EXPECT_EQ(shared.phases[0].max_hops, 2);
  // Disjoint links run in parallel: 0 -> 1 and 2 -> 3 cost as much as one.
  CollectiveRecord disjoint = one;
  disjoint.messages.push_back({0, 2, 3, 1000});
  EXPECT_DOUBLE_EQ(Estimate(disjoint, ring).seconds, 1e-6);
  // Opposite directions of one cable do not contend (full duplex).
  CollectiveRecord duplex = one;
  duplex.messages.push_back({0, 1, 0, 1000});
  EXPECT_DOUBLE_EQ(Estimate(duplex, ring).seconds, 1e-6);
}

TEST(CostModel, PhaseTimeIsBusiestLinkPlusLongestPathLatency) {
  const Topology ring = MakeTopology(TopologyKind::kRing, 8, {1e-6, 1e9});
  CollectiveRecord record;
  record.name = "test";
  record.num_replicas = 8;
  // Phase 0: a big 1-hop message and a small 3-hop one on other links.
  record.messages = {{0, 0, 1, 10000}, {0, 4, 7, 10}};
  const CollectiveCost cost = Estimate(record, ring);
  ASSERT_EQ(cost.phases.size(), 1u);
  EXPECT_DOUBLE_EQ(cost.phases[0].seconds, 10000 / 1e9 + 3 * 1e-6);
  EXPECT_EQ(cost.phases[0].bytes, 10010);
  EXPECT_EQ(cost.phases[0].num_messages, 2);
  ASSERT_EQ(cost.messages.size(), 2u);
  EXPECT_DOUBLE_EQ(cost.messages[0].seconds, 10000 / 1e9 + 1e-6);
  EXPECT_EQ(cost.messages[0].hops, 1);
  EXPECT_DOUBLE_EQ(cost.messages[1].seconds, 10 / 1e9 + 3e-6);
  EXPECT_EQ(cost.messages[1].hops, 3);
}

TEST(CostModel, RingAllReduceOnARingMatchesTheTextbookFormula) {
  const LinkParameters link;  // 5 us, 25 GB/s
  for (const std::int32_t n : {2, 3, 8, 16, 64}) {
    const std::int64_t bytes = static_cast<std::int64_t>(n) * 1'000'003;
    const Topology ring = MakeTopology(TopologyKind::kRing, n, link);
    const CollectiveCost cost = Estimate(RingAllReduceRecord(n, bytes), ring);
    const double expected =
        2.0 * (n - 1) * (link.latency_seconds + static_cast<double>(bytes) / (n * link.bandwidth_bytes_per_second));
    ExpectRelativelyNear(cost.seconds, expected, 1e-12);
    EXPECT_EQ(cost.phases.size(), static_cast<std::size_t>(2 * (n - 1)));
    // Through a SimulatedTimeline too.
    SimulatedTimeline timeline(n);
    timeline.AddCollective(cost);
    ExpectRelativelyNear(timeline.total_seconds(), expected, 1e-12);
  }
}

TEST(CostModel, SwitchVersusFullyConnectedOnAllToAll) {
  const LinkParameters link{2e-6, 10e9};
  const std::int32_t n = 8;
  const std::int64_t bytes = 1 << 20;
  const CollectiveRecord record = AllToAllRecord(n, bytes);
  const double per_link = static_cast<double>(bytes) / link.bandwidth_bytes_per_second;
  const CollectiveCost full = Estimate(record, MakeTopology(TopologyKind::kFullyConnected, n, link));
  const CollectiveCost star = Estimate(record, MakeTopology(TopologyKind::kSwitch, n, link));
  // Fully connected: every message on its own link.
  ExpectRelativelyNear(full.seconds, link.latency_seconds + per_link, 1e-12);
  // Switch: each uplink and downlink carries n-1 messages, over 2 hops.
  ExpectRelativelyNear(star.seconds, 2 * link.latency_seconds + (n - 1) * per_link, 1e-12);
  EXPECT_EQ(star.phases[0].max_link_bytes, (n - 1) * bytes);
  EXPECT_GT(star.seconds, 6 * full.seconds);
}

TEST(CostModel, EmptyPhasesSelfMessagesAndUnsortedMessages) {
  const Topology ring = MakeTopology(TopologyKind::kRing, 4, {1e-6, 1e9});
  CollectiveRecord record;
  record.name = "test";
  record.num_replicas = 4;
  record.num_phases = 4;  // phases 1 and 3 are empty
  record.messages = {{2, 1, 2, 500}, {0, 0, 1, 1000}, {0, 3, 3, 1 << 30}};
  const CollectiveCost cost = Estimate(record, ring);
  ASSERT_EQ(cost.phases.size(), 4u);
  EXPECT_DOUBLE_EQ(cost.phases[0].seconds, 1000 / 1e9 + 1e-6);  // the self message is free
  EXPECT_EQ(cost.phases[1].seconds, 0.0);
  EXPECT_DOUBLE_EQ(cost.phases[2].seconds, 500 / 1e9 + 1e-6);
  EXPECT_EQ(cost.phases[3].seconds, 0.0);
  EXPECT_EQ(cost.messages[2].seconds, 0.0);
  EXPECT_EQ(cost.messages[2].hops, 0);
  EXPECT_DOUBLE_EQ(cost.messages[0].seconds, 500 / 1e9 + 1e-6);  // parallel to the record
  EXPECT_DOUBLE_EQ(cost.seconds, cost.phases[0].seconds + cost.phases[2].seconds);

  CollectiveRecord empty;
  empty.name = "empty";
  empty.num_replicas = 4;
  const CollectiveCost nothing = Estimate(empty, ring);
  EXPECT_EQ(nothing.seconds, 0.0);
  EXPECT_TRUE(nothing.phases.empty());
}

TEST(CostModel, RejectsRecordsThatDoNotFitTheTopology) {
  const Topology ring = MakeTopology(TopologyKind::kRing, 4);
  CollectiveRecord record = RingAllReduceRecord(4, 400);
  record.step = 7;
  EXPECT_TRUE(EstimateCollective(record, ring).ok());

  const Topology bigger = MakeTopology(TopologyKind::kRing, 8);
  const Status mismatch = EstimateCollective(record, bigger).status();
  EXPECT_EQ(mismatch.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(mismatch.message().find("all_reduce/ring of step 7 has 4 replicas but the topology has 8"),
            std::string::npos)
      << mismatch.message();

  for (const Message bad : {Message{0, 4, 0, 1}, Message{0, 0, -1, 1}, Message{-1, 0, 1, 1}, Message{0, 0, 1, -5}}) {
    CollectiveRecord broken = record;
    broken.messages.push_back(bad);
    EXPECT_EQ(EstimateCollective(broken, ring).status().code(), Status::Code::kInvalidArgument);
  }
  CollectiveRecord overflowing = record;
  overflowing.messages = {{0, 0, 1, INT64_MAX}, {0, 0, 1, INT64_MAX}};
  EXPECT_EQ(EstimateCollective(overflowing, ring).status().code(), Status::Code::kInvalidArgument);
}

TEST(CostModel, EstimateCompute) {
  EXPECT_DOUBLE_EQ(EstimateCompute(2e12, 1e12), 2.0);
  EXPECT_EQ(EstimateCompute(0, 1e12), 0.0);
}

TEST(SimulatedTimeline, CollectivesWaitForTheSlowestReplica) {
  SimulatedTimeline timeline(2);
  CollectiveCost cost;
  cost.name = "all_reduce/ring";
  cost.phases = {{0.25}, {0.5}};
  cost.seconds = 0.75;
  for (const std::int64_t step : {0, 1}) {
    ASSERT_TRUE(timeline.AddCompute(step, 0, 1.0).ok());
    ASSERT_TRUE(timeline.AddCompute(step, 1, 2.0).ok());
    ASSERT_TRUE(timeline.AddCompute(step, 1, 1.0).ok());  // summed: replica 1 computes 3 s
    cost.step = step;
    timeline.AddCollective(cost);
  }
  EXPECT_DOUBLE_EQ(timeline.total_seconds(), 2 * (3.0 + 0.75));
  EXPECT_DOUBLE_EQ(timeline.compute_seconds(), 6.0);
  EXPECT_DOUBLE_EQ(timeline.collective_seconds(), 1.5);

  const std::vector<TimelineStage> layout = timeline.Layout();
  ASSERT_EQ(layout.size(), 4u);
  EXPECT_EQ(layout[0].kind, TimelineStage::Kind::kCompute);
  EXPECT_EQ(layout[0].replica_seconds, (std::vector<double>{1.0, 3.0}));
  EXPECT_EQ(layout[1].kind, TimelineStage::Kind::kCollective);
  EXPECT_DOUBLE_EQ(layout[1].start_seconds, 3.0);
  EXPECT_EQ(layout[1].phase_end_seconds, (std::vector<double>{3.25, 3.75}));
  EXPECT_EQ(layout[3].step, 1);
  EXPECT_DOUBLE_EQ(layout[3].start_seconds, 6.75);
  EXPECT_EQ(layout[3].collective_index, 1u);
}

TEST(SimulatedTimeline, StepsRunInOrderAndComputeAfterACollectiveIsANewStage) {
  SimulatedTimeline timeline(3);
  CollectiveCost cost;
  cost.name = "x";
  cost.step = 5;
  cost.phases = {{1.0}};
  cost.seconds = 1.0;
  // Step 5 is added before step 2 but runs after it.
  ASSERT_TRUE(timeline.AddCompute(5, 0, 1.0).ok());
  timeline.AddCollective(cost);
  ASSERT_TRUE(timeline.AddCompute(5, 2, 0.5).ok());  // e.g. an optimizer update
  ASSERT_TRUE(timeline.AddCompute(2, 1, 4.0).ok());
  const std::vector<TimelineStage> layout = timeline.Layout();
  ASSERT_EQ(layout.size(), 4u);
  EXPECT_EQ(layout[0].step, 2);
  EXPECT_DOUBLE_EQ(layout[0].end_seconds, 4.0);
  EXPECT_EQ(layout[3].kind, TimelineStage::Kind::kCompute);
  EXPECT_DOUBLE_EQ(layout[3].start_seconds, 6.0);
  EXPECT_DOUBLE_EQ(timeline.total_seconds(), 6.5);
  EXPECT_EQ(SimulatedTimeline(2).total_seconds(), 0.0);
}

TEST(SimulatedTimeline, RejectsBadCompute) {
  SimulatedTimeline timeline(2);
  EXPECT_EQ(timeline.AddCompute(0, 2, 1.0).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(timeline.AddCompute(0, -1, 1.0).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(timeline.AddCompute(0, 0, -1.0).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(timeline.AddCompute(0, 0, NAN).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(timeline.AddCompute(0, 0, INFINITY).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(timeline.total_seconds(), 0.0);
}

}  // namespace
}  // namespace dtlab
