#include "sim/timing/cost_model.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>
#include <utility>

namespace dtlab {

namespace {

// "collective all_reduce/ring of step 3": how errors name a record.
std::string Describe(const CollectiveRecord& record) {
  return "collective " + record.name + " of step " + std::to_string(record.step);
}

}  // namespace

StatusOr<CollectiveCost> EstimateCollective(const CollectiveRecord& record, const Topology& topology) {
  const std::int32_t n = topology.num_replicas();
  if (record.num_replicas != n) {
    return Status::InvalidArgument(Describe(record) + " has " + std::to_string(record.num_replicas) +
                                   " replicas but the topology has " + std::to_string(n));
  }
  std::int32_t num_phases = std::max(record.num_phases, 0);
  for (std::size_t i = 0; i < record.messages.size(); ++i) {
    const Message& m = record.messages[i];
    if (m.phase < 0 || m.bytes < 0 || m.sender < 0 || m.sender >= n || m.receiver < 0 || m.receiver >= n) {
      return Status::InvalidArgument(
          Describe(record) + ": message " + std::to_string(i) + " (phase " + std::to_string(m.phase) + ", " +
          std::to_string(m.sender) + " -> " + std::to_string(m.receiver) + ", " + std::to_string(m.bytes) +
          " bytes) needs phase >= 0, bytes >= 0 and replicas in [0, " + std::to_string(n) + ")");
    }
    num_phases = std::max(num_phases, m.phase + 1);
  }

  CollectiveCost cost;
  cost.name = record.name;
  cost.step = record.step;
  cost.phases.resize(num_phases);
  cost.messages.resize(record.messages.size());

  // Messages grouped by phase; the stable sort keeps the record's order within a
  // phase (the log already sorts by phase, so this is usually a no-op).
  std::vector<std::size_t> order(record.messages.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&record](std::size_t a, std::size_t b) {
    return record.messages[a].phase < record.messages[b].phase;
  });

  const double bandwidth = topology.link_parameters().bandwidth_bytes_per_second;
  const double latency = topology.link_parameters().latency_seconds;
  // Scratch reused across phases. Link loads are kept sparse (sorted (link,
  // bytes) pairs) rather than in an array of num_links, which for a large fully
  // connected topology would be far bigger than the phase.
  std::vector<LinkId> routes;
  std::vector<std::size_t> route_begin;
  std::vector<std::pair<LinkId, std::int64_t>> loads;

  for (std::size_t first = 0; first < order.size();) {
    const std::int32_t phase = record.messages[order[first]].phase;
    std::size_t last = first;
    while (last < order.size() && record.messages[order[last]].phase == phase) ++last;

    // Route every message of the phase and collect (link, bytes).
    PhaseCost& phase_cost = cost.phases[phase];
    routes.clear();
    route_begin.clear();
    loads.clear();
    for (std::size_t k = first; k < last; ++k) {
      const Message& m = record.messages[order[k]];
      route_begin.push_back(routes.size());
      topology.AppendRoute(m.sender, m.receiver, &routes);
      for (std::size_t r = route_begin.back(); r < routes.size(); ++r) loads.emplace_back(routes[r], m.bytes);
      if (__builtin_add_overflow(phase_cost.bytes, m.bytes, &phase_cost.bytes)) {
        return Status::InvalidArgument(Describe(record) + ": the bytes of phase " + std::to_string(phase) +
                                       " overflow 64 bits");
      }
      ++phase_cost.num_messages;
    }
    route_begin.push_back(routes.size());

    // Sum the bytes per link: sort by link, then merge runs in place.
    std::sort(loads.begin(), loads.end());
    std::size_t unique = 0;
    for (std::size_t i = 0; i < loads.size(); ++i) {
      if (unique > 0 && loads[unique - 1].first == loads[i].first) {
        if (__builtin_add_overflow(loads[unique - 1].second, loads[i].second, &loads[unique - 1].second)) {
          return Status::InvalidArgument(Describe(record) + ": the bytes on link " + topology.LinkName(loads[i].first) +
                                         " in phase " + std::to_string(phase) + " overflow 64 bits");
        }
      } else {
        loads[unique++] = loads[i];
      }
    }
    loads.resize(unique);
    const auto load_of = [&loads](LinkId link) {
      const auto it = std::lower_bound(loads.begin(), loads.end(), std::pair<LinkId, std::int64_t>(link, 0),
                                       [](const auto& a, const auto& b) { return a.first < b.first; });
      assert(it != loads.end() && it->first == link);
      return it->second;
    };

    for (const auto& [link, bytes] : loads) phase_cost.max_link_bytes = std::max(phase_cost.max_link_bytes, bytes);
    for (std::size_t k = first; k < last; ++k) {
      std::int64_t busiest = 0;
      for (std::size_t r = route_begin[k - first]; r < route_begin[k - first + 1]; ++r) {
        busiest = std::max(busiest, load_of(routes[r]));
      }
      MessageCost& message_cost = cost.messages[order[k]];
      message_cost.hops = static_cast<std::int32_t>(route_begin[k - first + 1] - route_begin[k - first]);
      // Same expression as the phase's, with smaller or equal operands, so a
      // message never outlasts its phase (floating-point rounding is monotone).
      message_cost.seconds =
          static_cast<double>(busiest) / bandwidth + static_cast<double>(message_cost.hops) * latency;
      phase_cost.max_hops = std::max(phase_cost.max_hops, message_cost.hops);
    }
    phase_cost.seconds =
        static_cast<double>(phase_cost.max_link_bytes) / bandwidth + static_cast<double>(phase_cost.max_hops) * latency;
    first = last;
  }

  for (const PhaseCost& phase_cost : cost.phases) cost.seconds += phase_cost.seconds;
  return cost;
}

double EstimateCompute(double flops, double device_flops_per_second) {
  assert(flops >= 0 && device_flops_per_second > 0);
  return flops / device_flops_per_second;
}

SimulatedTimeline::SimulatedTimeline(std::int32_t num_replicas) : num_replicas_(num_replicas) {
  assert(num_replicas >= 1);
}

Status SimulatedTimeline::AddCompute(std::int64_t step, std::int32_t replica, double seconds) {
  if (replica < 0 || replica >= num_replicas_) {
    return Status::InvalidArgument("compute of replica " + std::to_string(replica) + " in step " +
                                   std::to_string(step) + ": the timeline has replicas 0.." +
                                   std::to_string(num_replicas_ - 1));
  }
  if (!std::isfinite(seconds) || seconds < 0) {
    return Status::InvalidArgument("compute of replica " + std::to_string(replica) + " in step " +
                                   std::to_string(step) + " must take a finite, non-negative time, got " +
                                   std::to_string(seconds) + " seconds");
  }
  std::vector<Stage>& stages = steps_[step];
  if (stages.empty() || stages.back().is_collective) {
    Stage stage;
    stage.replica_seconds.assign(num_replicas_, 0.0);
    stages.push_back(std::move(stage));
  }
  stages.back().replica_seconds[replica] += seconds;
  return Status::Ok();
}

void SimulatedTimeline::AddCollective(const CollectiveCost& cost) {
  Stage stage;
  stage.is_collective = true;
  stage.collective_index = collectives_.size();
  collectives_.push_back(cost);
  steps_[cost.step].push_back(std::move(stage));
}

std::vector<TimelineStage> SimulatedTimeline::Layout() const {
  std::vector<TimelineStage> layout;
  double now = 0;
  for (const auto& [step, stages] : steps_) {
    for (const Stage& stage : stages) {
      TimelineStage placed;
      placed.step = step;
      placed.start_seconds = now;
      if (stage.is_collective) {
        placed.kind = TimelineStage::Kind::kCollective;
        placed.collective_index = stage.collective_index;
        // Phase by phase from the start, so that every phase boundary a trace
        // draws is exactly an end time listed here.
        for (const PhaseCost& phase : collectives_[stage.collective_index].phases) {
          now += phase.seconds;
          placed.phase_end_seconds.push_back(now);
        }
      } else {
        placed.kind = TimelineStage::Kind::kCompute;
        placed.replica_seconds = stage.replica_seconds;
        now += *std::max_element(stage.replica_seconds.begin(), stage.replica_seconds.end());
      }
      placed.end_seconds = now;
      layout.push_back(std::move(placed));
    }
  }
  return layout;
}

double SimulatedTimeline::total_seconds() const {
  const std::vector<TimelineStage> layout = Layout();
  return layout.empty() ? 0.0 : layout.back().end_seconds;
}

double SimulatedTimeline::compute_seconds() const {
  double total = 0;
  for (const auto& [step, stages] : steps_) {
    for (const Stage& stage : stages) {
      if (!stage.is_collective) {
        total += *std::max_element(stage.replica_seconds.begin(), stage.replica_seconds.end());
      }
    }
  }
  return total;
}

double SimulatedTimeline::collective_seconds() const {
  double total = 0;
  for (const CollectiveCost& cost : collectives_) total += cost.seconds;
  return total;
}

}  // namespace dtlab
