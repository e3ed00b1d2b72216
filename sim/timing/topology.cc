#include "sim/timing/topology.h"

#include "core/enum_names.h"

#include <cassert>
#include <cmath>
#include <cstdio>

namespace dtlab {

namespace {

constexpr NameTable<TopologyKind, 4> kKindNames = {{
    {"fully_connected", TopologyKind::kFullyConnected},
    {"ring", TopologyKind::kRing},
    {"switch", TopologyKind::kSwitch},
    {"torus2d", TopologyKind::kTorus2D},
}};

// The number of hops and the direction (+1 or -1) of the shorter way from a to b
// around a ring of `size` nodes; the increasing direction on a tie.
void RingSteps(std::int32_t a, std::int32_t b, std::int32_t size, std::int32_t* steps, int* sign) {
  const std::int32_t forward = ((b - a) % size + size) % size;
  const std::int32_t backward = (size - forward) % size;
  if (forward <= backward) {
    *steps = forward;
    *sign = +1;
  } else {
    *steps = backward;
    *sign = -1;
  }
}

// A double as printf's %g writes it ("5e-06", "2.5e+10", "nan").
std::string FormatNumber(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", value);
  return buffer;
}

// "5 us", "1.5 ms", "0 s": a short human-readable duration.
std::string FormatSeconds(double seconds) {
  char buffer[64];
  if (seconds == 0) {
    std::snprintf(buffer, sizeof(buffer), "0 s");
  } else if (seconds < 1e-3) {
    std::snprintf(buffer, sizeof(buffer), "%g us", seconds * 1e6);
  } else if (seconds < 1) {
    std::snprintf(buffer, sizeof(buffer), "%g ms", seconds * 1e3);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%g s", seconds);
  }
  return buffer;
}

}  // namespace

StatusOr<TopologyKind> ParseTopologyKind(std::string_view name) { return ParseEnumName(name, kKindNames, "topology"); }

std::string_view TopologyKindName(TopologyKind kind) { return EnumName(kind, kKindNames); }

StatusOr<Topology> Topology::Create(TopologyKind kind, std::int32_t num_replicas, LinkParameters link,
                                    std::int32_t torus_rows) {
  const std::string kind_name(TopologyKindName(kind));
  if (num_replicas < 1) {
    return Status::InvalidArgument(kind_name + " topology needs at least 1 replica, got " +
                                   std::to_string(num_replicas));
  }
  if (!std::isfinite(link.latency_seconds) || link.latency_seconds < 0) {
    return Status::InvalidArgument("link latency must be finite and >= 0 seconds, got " +
                                   FormatNumber(link.latency_seconds));
  }
  if (!std::isfinite(link.bandwidth_bytes_per_second) || link.bandwidth_bytes_per_second <= 0) {
    return Status::InvalidArgument("link bandwidth must be finite and > 0 bytes per second, got " +
                                   FormatNumber(link.bandwidth_bytes_per_second));
  }

  Topology topology;
  topology.kind_ = kind;
  topology.num_replicas_ = num_replicas;
  topology.link_ = link;
  switch (kind) {
    case TopologyKind::kFullyConnected:
      if (num_replicas > kMaxFullyConnectedReplicas) {
        return Status::InvalidArgument("a fully_connected topology supports at most " +
                                       std::to_string(kMaxFullyConnectedReplicas) + " replicas (one link per " +
                                       "ordered pair), got " + std::to_string(num_replicas));
      }
      topology.num_links_ = num_replicas * (num_replicas - 1);
      return topology;
    case TopologyKind::kSwitch:
      if (num_replicas > (INT32_MAX - 1) / 2) {
        return Status::InvalidArgument("too many replicas for a switch topology: " + std::to_string(num_replicas));
      }
      topology.num_links_ = 2 * num_replicas;
      return topology;
    case TopologyKind::kRing:
      topology.rows_ = 1;
      topology.cols_ = num_replicas;
      break;
    case TopologyKind::kTorus2D: {
      if (torus_rows < 0) {
        return Status::InvalidArgument("torus rows must be >= 0 (0 picks the most square grid), got " +
                                       std::to_string(torus_rows));
      }
      std::int32_t rows = torus_rows;
      if (rows == 0) {
        // The largest divisor not above sqrt(N): the most square grid, rows <= cols.
        for (std::int32_t d = 1; static_cast<std::int64_t>(d) * d <= num_replicas; ++d) {
          if (num_replicas % d == 0) rows = d;
        }
      } else if (num_replicas % rows != 0) {
        return Status::InvalidArgument("torus rows (" + std::to_string(rows) + ") must divide the replica count (" +
                                       std::to_string(num_replicas) + ")");
      }
      topology.rows_ = rows;
      topology.cols_ = num_replicas / rows;
      break;
    }
    default:
      return Status::InvalidArgument("unknown topology kind " + std::to_string(static_cast<int>(kind)));
  }

  // Ring or torus: assign a slot to each direction that has its own links. A
  // dimension of size 2 needs only the plus links (plus and minus lead to the same
  // neighbour, and routing prefers plus on the tie); of size 1, none.
  const auto add_dimension = [&topology](std::int32_t size, Direction plus, Direction minus) {
    if (size >= 2) {
      topology.slot_direction_[topology.directions_per_node_] = plus;
      topology.direction_slot_[plus] = topology.directions_per_node_++;
    }
    if (size >= 3) {
      topology.slot_direction_[topology.directions_per_node_] = minus;
      topology.direction_slot_[minus] = topology.directions_per_node_++;
    }
  };
  add_dimension(topology.cols_, kPlusX, kMinusX);
  add_dimension(topology.rows_, kPlusY, kMinusY);
  if (num_replicas > INT32_MAX / 4) {
    return Status::InvalidArgument("too many replicas for a " + kind_name +
                                   " topology: " + std::to_string(num_replicas));
  }
  topology.num_links_ = num_replicas * topology.directions_per_node_;
  return topology;
}

std::int32_t Topology::GridNeighbor(std::int32_t node, Direction direction) const {
  const std::int32_t row = node / cols_, col = node % cols_;
  switch (direction) {
    case kPlusX:
      return row * cols_ + (col + 1) % cols_;
    case kMinusX:
      return row * cols_ + (col + cols_ - 1) % cols_;
    case kPlusY:
      return ((row + 1) % rows_) * cols_ + col;
    case kMinusY:
      return ((row + rows_ - 1) % rows_) * cols_ + col;
  }
  return node;
}

Link Topology::link(LinkId id) const {
  assert(id >= 0 && id < num_links_);
  const std::int32_t n = num_replicas_;
  switch (kind_) {
    case TopologyKind::kFullyConnected: {
      const std::int32_t from = id / (n - 1), index = id % (n - 1);
      return {from, index < from ? index : index + 1};
    }
    case TopologyKind::kSwitch:
      return id < n ? Link{id, n} : Link{n, id - n};
    case TopologyKind::kRing:
    case TopologyKind::kTorus2D: {
      const std::int32_t from = id / directions_per_node_;
      return {from, GridNeighbor(from, slot_direction_[id % directions_per_node_])};
    }
  }
  return {};
}

std::string Topology::LinkName(LinkId id) const {
  const Link l = link(id);
  const auto node = [this](std::int32_t v) { return v == num_replicas_ ? std::string("switch") : std::to_string(v); };
  return node(l.from) + "->" + node(l.to);
}

std::int32_t Topology::Walk(std::int32_t node, Direction direction, std::int32_t steps,
                            std::vector<LinkId>* route) const {
  // On a dimension of size 2 the minus direction is never chosen (ties go plus),
  // so direction_slot_ is defined for every direction routing uses.
  const std::int32_t slot = direction_slot_[direction];
  for (std::int32_t i = 0; i < steps; ++i) {
    assert(slot >= 0);
    route->push_back(node * directions_per_node_ + slot);
    node = GridNeighbor(node, direction);
  }
  return node;
}

void Topology::AppendRoute(std::int32_t sender, std::int32_t receiver, std::vector<LinkId>* route) const {
  assert(sender >= 0 && sender < num_replicas_ && receiver >= 0 && receiver < num_replicas_);
  if (sender == receiver) return;
  const std::int32_t n = num_replicas_;
  switch (kind_) {
    case TopologyKind::kFullyConnected:
      route->push_back(sender * (n - 1) + (receiver < sender ? receiver : receiver - 1));
      return;
    case TopologyKind::kSwitch:
      route->push_back(sender);        // uplink sender -> switch
      route->push_back(n + receiver);  // downlink switch -> receiver
      return;
    case TopologyKind::kRing:
    case TopologyKind::kTorus2D: {
      std::int32_t steps = 0;
      int sign = 0;
      // X first: along the sender's row to the receiver's column.
      RingSteps(sender % cols_, receiver % cols_, cols_, &steps, &sign);
      const std::int32_t corner = Walk(sender, sign > 0 ? kPlusX : kMinusX, steps, route);
      // Then Y: along that column to the receiver's row.
      RingSteps(sender / cols_, receiver / cols_, rows_, &steps, &sign);
      [[maybe_unused]] const std::int32_t end = Walk(corner, sign > 0 ? kPlusY : kMinusY, steps, route);
      assert(end == receiver);
      return;
    }
  }
}

std::vector<LinkId> Topology::Route(std::int32_t sender, std::int32_t receiver) const {
  std::vector<LinkId> route;
  AppendRoute(sender, receiver, &route);
  return route;
}

std::string Topology::Describe() const {
  std::string text;
  if (kind_ == TopologyKind::kTorus2D) {
    text = "torus2d " + std::to_string(rows_) + "x" + std::to_string(cols_) + " of ";
  } else {
    text = std::string(TopologyKindName(kind_)) + " of ";
  }
  text += std::to_string(num_replicas_) + (num_replicas_ == 1 ? " replica" : " replicas");
  char bandwidth[64];
  std::snprintf(bandwidth, sizeof(bandwidth), "%g GB/s", link_.bandwidth_bytes_per_second / 1e9);
  return text + "; links " + FormatSeconds(link_.latency_seconds) + ", " + bandwidth;
}

}  // namespace dtlab
