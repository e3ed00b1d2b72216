// Topology: how the replicas of the simulated cluster are wired, and which links a
// message crosses on its way from one replica to another.
//
// Every physical link is full duplex: it is modelled as two directed links, one per
// direction, each with the whole bandwidth and latency of LinkParameters. A LinkId
// names one directed link; ids are dense, 0 <= id < num_links(). Nodes 0..N-1 are
// the replicas; kSwitch adds node N, the switch.
//
// Routing is static and deterministic (the same route for the same pair, always):
//
//   kFullyConnected  one dedicated link per ordered pair (s, r): 1 hop, never shared
//                    with another pair. N(N-1) directed links.
//   kRing            replicas 0..N-1 around a bidirectional ring; a message takes the
//                    shorter direction, clockwise (i -> i+1) on a tie, one link per
//                    hop. Ring of 8, 0 -> 5: 3 hops counter-clockwise (0,7,6,5).
//   kSwitch          each replica has an uplink (i -> switch) and a downlink
//                    (switch -> i) to one non-blocking central switch; every message
//                    crosses the sender's uplink then the receiver's downlink: 2 hops.
//   kTorus2D         rows x cols grid with wraparound; replica i sits at row i / cols,
//                    column i % cols. Dimension-ordered routing: first along the row
//                    (X, changing the column), then along the column (Y, changing the
//                    row), each the shorter way round, the increasing direction on a
//                    tie. Torus 4x4, (0,0) -> (2,3): 1 hop X (wrapping 0 -> 3), then
//                    2 hops Y (3 -> 7 -> 11).
//
// A ring or torus dimension of size 2 has one directed link each way between its
// two nodes (not two parallel cables); of size 1, none. A message to oneself
// crosses no link.
//
// Thread safety: a Topology is an immutable value; concurrent const use is safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dtlab {

enum class TopologyKind { kFullyConnected, kRing, kSwitch, kTorus2D };

/// "fully_connected", "ring", "switch", "torus2d"; InvalidArgument otherwise (lists the names).
StatusOr<TopologyKind> ParseTopologyKind(std::string_view name);
std::string_view TopologyKindName(TopologyKind kind);

/// The parameters of every directed link of a topology (the alpha-beta model:
/// sending b bytes over one link alone takes latency + b / bandwidth).
struct LinkParameters {
  /// Seconds per hop (alpha). Default 5 us, a typical NIC-to-NIC latency. >= 0.
  double latency_seconds = 5e-6;
  /// Bytes per second of one direction of one link (1/beta). Default 25e9
  /// (200 Gb/s). > 0.
  double bandwidth_bytes_per_second = 25e9;
};

/// Dense index of one directed link of a topology.
using LinkId = std::int32_t;

/// One directed link: from node `from` to node `to` (replica ids, or
/// num_replicas() for the switch).
struct Link {
  std::int32_t from = 0;
  std::int32_t to = 0;
};

class Topology {
 public:
  /// The most replicas a fully connected topology may have (its N(N-1) directed
  /// links must fit in a LinkId).
  static constexpr std::int32_t kMaxFullyConnectedReplicas = 46341;

  /// Builds a topology of `num_replicas` replicas whose links all have `link`'s
  /// parameters. `torus_rows` is used by kTorus2D only (ignored otherwise): the
  /// number of rows, which must divide num_replicas; 0 picks the most square
  /// factorization (rows = the largest divisor <= sqrt(N), so 16 -> 4x4, 8 -> 2x4,
  /// a prime N -> 1xN, which is a ring). InvalidArgument for num_replicas < 1, a
  /// fully connected topology over kMaxFullyConnectedReplicas, torus_rows < 0 or
  /// not dividing num_replicas, a negative or non-finite latency, or a bandwidth
  /// that is not positive and finite.
  static StatusOr<Topology> Create(TopologyKind kind, std::int32_t num_replicas, LinkParameters link = {},
                                   std::int32_t torus_rows = 0);

  TopologyKind kind() const { return kind_; }
  std::int32_t num_replicas() const { return num_replicas_; }
  const LinkParameters& link_parameters() const { return link_; }
  /// The grid of a ring (1 x N) or torus (rows x cols); 0 for the other kinds.
  std::int32_t rows() const { return rows_; }
  std::int32_t cols() const { return cols_; }
  /// Number of directed links; LinkIds are 0..num_links()-1.
  std::int32_t num_links() const { return num_links_; }

  /// The endpoints of a link. REQUIRES: 0 <= id < num_links().
  Link link(LinkId id) const;
  /// "3->4", "3->switch", "switch->4": for messages and traces.
  std::string LinkName(LinkId id) const;

  /// The directed links a message from `sender` to `receiver` crosses, in order
  /// (the routing rules above); empty when sender == receiver. Each link's `to` is
  /// the next link's `from`. REQUIRES: both in [0, num_replicas()).
  std::vector<LinkId> Route(std::int32_t sender, std::int32_t receiver) const;
  /// As Route, appending to `*route` (which is not cleared), so that callers
  /// routing many messages reuse one buffer.
  void AppendRoute(std::int32_t sender, std::int32_t receiver, std::vector<LinkId>* route) const;

  /// E.g. "ring of 8 replicas", "torus2d 4x4 of 16 replicas", then the link
  /// parameters: "; links 5 us, 25 GB/s".
  std::string Describe() const;

 private:
  // Directions of a ring or torus link, in the order their slots are assigned.
  enum Direction { kPlusX = 0, kMinusX = 1, kPlusY = 2, kMinusY = 3 };

  Topology() = default;
  // Walks `steps` hops from `node` in direction `direction` of the grid, appending
  // each link; returns the node reached.
  std::int32_t Walk(std::int32_t node, Direction direction, std::int32_t steps, std::vector<LinkId>* route) const;
  std::int32_t GridNeighbor(std::int32_t node, Direction direction) const;

  TopologyKind kind_ = TopologyKind::kRing;
  std::int32_t num_replicas_ = 0;
  LinkParameters link_;
  std::int32_t rows_ = 0, cols_ = 0;
  std::int32_t num_links_ = 0;
  // Ring and torus: the directed links of node n are n * directions_per_node_ +
  // slot, where direction_slot_[d] is the slot of direction d or -1 where that
  // direction has no link (a dimension of size 1, or the minus direction of a
  // dimension of size 2, which reuses the plus link).
  std::int32_t directions_per_node_ = 0;
  std::int32_t direction_slot_[4] = {-1, -1, -1, -1};
  Direction slot_direction_[4] = {kPlusX, kPlusX, kPlusX, kPlusX};
};

}  // namespace dtlab
