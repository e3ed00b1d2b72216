#include "sim/training/run_timing.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "core/exact_words.h"
#include "sim/comm/all_reduce_algorithm.h"
#include "sim/comm/collectives.h"
#include "sim/comm/compact_exact.h"
#include "sim/engines/cluster.h"
#include "sim/timing/trace.h"

namespace dtlab {

namespace {

// The priced collectives of one synchronous step of `config` (n > 1 replicas), from
// their schedules alone; none, with the reason in *not_estimated, when a step would
// log more messages than the cost model is given at once.
struct PricedCollectives {
  std::vector<CollectiveCost> costs;
  std::int64_t bytes = 0;  // what their messages carry
};

StatusOr<PricedCollectives> PriceStepCollectives(const TrainConfig& config, std::int64_t parameter_values,
                                                 std::string* not_estimated) {
  const ClusterConfig& cluster = config.cluster;
  const std::int32_t n = std::max(cluster.replicas, 1);
  PricedCollectives priced;
  // Price the step only while its records stay small (kMaxPricedMessages).
  const bool central = cluster.strategy == StrategyKind::kCentralStorage;
  const double messages = central ? 2.0 * n * n : cluster.all_reduce.info().log_messages(n);
  if (messages > kMaxPricedMessages) {
    char text[160];
    std::snprintf(text, sizeof text,
                  "one step's collectives send about %.3g messages, more than the %.0e the cost model is given at once",
                  messages, kMaxPricedMessages);
    *not_estimated = text;
    return priced;
  }
  DTLAB_ASSIGN_OR_RETURN(const Topology topology, Topology::Create(config.topology, n, config.link));
  const bool exact = cluster.math == MathMode::kExact;
  const std::int64_t words = exact ? parameter_values * kExactWords : parameter_values;
  const std::int64_t word_bytes = exact ? 8 : 4;
  std::vector<CollectiveRecord> records;
  std::vector<std::int64_t> repeats;  // per record, where not 1: how many of the step's collectives it prices
  auto all_reduce = [&](std::int64_t count, std::int64_t element_bytes) {
    const AllReduceSpec spec{count, false, cluster.replicas_per_worker()};
    records.push_back(RecordSchedule("all_reduce/" + std::string(AllReduceAlgorithmName(cluster.all_reduce)), n, count,
                                     element_bytes,
                                     [&](ScheduleTransport& t) { cluster.all_reduce.info().schedule(t, spec); }));
  };
  if (exact && !central && cluster.exact_all_reduce == ExactAllReduce::kCompact) {
    // The compact rounds' first two all-reduces (sim/comm/compact_exact.h): a float
    // per block, then (in one process) a 56-byte Int448 per eight values. The refinement rounds, and
    // whole words for non-finite blocks, depend on the values: they are priced when a
    // step sends them.
    all_reduce((parameter_values + kCompactBlock - 1) / kCompactBlock, 4);
    const std::int64_t groups = (parameter_values + Int448::kFields - 1) / Int448::kFields;
    const std::int32_t processes = config.worker_group != nullptr ? config.worker_group->size() : 1;
    if (processes > 1) {
      // Between processes, round 2 is reduce-scattered, an int64 field per value, and
      // its floats all-gathered (ExactSumCollectives::Scattered), piece by piece: the
      // full pieces' pair priced once and counted for each, then the last piece's.
      const std::int32_t per = n / processes;
      if (processes == 2 && per == 1) {
        // Two ranks of one replica each send their high words (Scattered::high_words),
        // the same bytes as the fields, and once a call each block's header.
        const std::int64_t blocks = (parameter_values + kCompactBlock - 1) / kCompactBlock;
        const std::vector<ElementRange> halves = {{0, blocks / 2}, {blocks / 2, blocks - blocks / 2}};
        records.push_back(RecordSchedule("reduce_scatter", n, blocks, sizeof(std::int64_t), [&](ScheduleTransport& t) {
          ScheduleReduceScatterSlices(t, per, blocks, halves);
        }));
      }
      repeats.resize(records.size(), 1);
      const std::int64_t full = parameter_values / kCompactScatterPiece, last = parameter_values % kCompactScatterPiece;
      for (const std::pair<std::int64_t, std::int64_t>& kind :
           {std::pair{kCompactScatterPiece, full}, std::pair{last, std::int64_t{1}}}) {
        const std::int64_t size = kind.first, pieces = kind.second;  // (no structured binding: lambdas take it below)
        if (size == 0 || pieces == 0) continue;
        const std::vector<ElementRange> slices = CompactScatterSlices(size, processes);
        records.push_back(RecordSchedule("reduce_scatter", n, size, sizeof(std::int64_t), [&](ScheduleTransport& t) {
          ScheduleReduceScatterSlices(t, per, size, slices);
        }));
        records.push_back(RecordSchedule("all_gather", n, size, 4,
                                         [&](ScheduleTransport& t) { ScheduleAllGatherSlices(t, per, slices); }));
        repeats.resize(records.size(), pieces);  // each full piece's the same: priced once
      }
    } else {
      all_reduce(groups, sizeof(Int448));
    }
  } else if (central) {
    records.push_back(RecordSchedule("reduce", n, words, word_bytes,
                                     [&](ScheduleTransport& t) { ScheduleReduce(t, words, 0, false); }));
    records.push_back(RecordSchedule("broadcast", n, parameter_values, 4,
                                     [&](ScheduleTransport& t) { ScheduleBroadcast(t, parameter_values, 0); }));
  } else {
    all_reduce(words, word_bytes);
  }
  repeats.resize(records.size(), 1);
  for (std::size_t i = 0; i < records.size(); ++i) {
    DTLAB_ASSIGN_OR_RETURN(CollectiveCost cost, EstimateCollective(records[i], topology));
    cost.seconds *= static_cast<double>(repeats[i]);
    priced.costs.push_back(std::move(cost));
    for (const Message& m : records[i].messages) priced.bytes += m.bytes * repeats[i];
  }
  return priced;
}

}  // namespace

StatusOr<StepTimeEstimate> EstimateFullStep(const TrainConfig& config, double flops_per_example,
                                            std::int64_t parameter_values, std::string* not_estimated) {
  StepTimeEstimate estimate;
  const ClusterConfig& cluster = config.cluster;
  if (cluster.strategy == StrategyKind::kParameterServer) {
    *not_estimated = "parameter_server keeps an asynchronous clock: its time comes from the run";
    return estimate;
  }
  const std::int32_t n = std::max(cluster.replicas, 1);
  const std::int64_t share = (config.global_batch_size() + n - 1) / n;
  estimate.compute_seconds = EstimateCompute(
      flops_per_example * static_cast<double>(share * cluster.accumulation.steps), config.device_flops_per_second);
  if (n == 1) return estimate;
  DTLAB_ASSIGN_OR_RETURN(const PricedCollectives priced, PriceStepCollectives(config, parameter_values, not_estimated));
  if (!not_estimated->empty()) estimate.compute_seconds = 0;
  for (const CollectiveCost& cost : priced.costs) estimate.collective_seconds += cost.seconds;
  estimate.collective_bytes = priced.bytes;
  return estimate;
}

StatusOr<RunTiming> RunTiming::Create(const TrainConfig& config, double flops_per_example,
                                      std::int64_t parameter_values) {
  DTLAB_ASSIGN_OR_RETURN(Topology topology, Topology::Create(config.topology, config.cluster.replicas, config.link));
  return RunTiming(config, flops_per_example, parameter_values, std::move(topology));
}

RunTiming::RunTiming(const TrainConfig& config, double flops_per_example, std::int64_t parameter_values,
                     Topology topology)
    : config_(&config),
      asynchronous_(config.cluster.strategy == StrategyKind::kParameterServer),
      flops_per_example_(flops_per_example),
      parameter_values_(parameter_values),
      topology_(std::move(topology)),
      timeline_(config.cluster.replicas) {}

Status RunTiming::AddStep(const EngineStep& step, MessageLog& log, StepRecord& record) {
  const bool tracing = !config_->trace_path.empty();
  if (asynchronous_) {
    const ParameterServerUpdate& update = *step.update;
    staleness_.push_back(update.staleness);
    asynchronous_seconds_ = update.finish_seconds;
    if (tracing && update.update <= config_->trace_steps * config_->cluster.workers) traced_updates_.push_back(update);
    return Status::Ok();
  }
  // Simulated time: every replica computes its share, then the step's collectives.
  const StepResult& result = *step.result;
  const bool traced = tracing && step.step - 1 < config_->trace_steps;
  if (traced) traced_compute_.emplace_back();
  for (std::int32_t r = 0; r < config_->cluster.replicas; ++r) {
    double seconds = EstimateCompute(
        flops_per_example_ * static_cast<double>(result.replica_batch_sizes[static_cast<std::size_t>(r)]),
        config_->device_flops_per_second);
    if (!result.straggler_seconds.empty()) seconds += result.straggler_seconds[static_cast<std::size_t>(r)];
    DTLAB_RETURN_IF_ERROR(timeline_.AddCompute(step.step, r, seconds));
    if (traced) traced_compute_.back().push_back(seconds);
    record.compute_seconds.push_back(seconds);
  }
  if (result.folded) {
    DTLAB_RETURN_IF_ERROR(FoldedCosts());
    for (const CollectiveCost& cost : *folded_costs_) {
      CollectiveCost priced = cost;
      priced.step = step.step;
      timeline_.AddCollective(priced);
      record.collectives.push_back(std::move(priced));
    }
    collective_bytes_ += folded_bytes_;
  }
  for (const CollectiveRecord& collective : log.collectives()) {
    DTLAB_ASSIGN_OR_RETURN(CollectiveCost cost, EstimateCollective(collective, topology_));
    timeline_.AddCollective(cost);
    for (const Message& m : collective.messages) collective_bytes_ += m.bytes;
    if (traced) traced_collectives_.push_back(collective);
    record.collectives.push_back(std::move(cost));
  }
  log.Clear();
  return Status::Ok();
}

Status RunTiming::FoldedCosts() {
  if (folded_costs_) return Status::Ok();
  DTLAB_ASSIGN_OR_RETURN(PricedCollectives priced,
                         PriceStepCollectives(*config_, parameter_values_, &folded_not_priced_));
  for (CollectiveCost& cost : priced.costs) {
    cost.messages.clear();
    cost.messages.shrink_to_fit();
  }
  folded_costs_ = std::move(priced.costs);
  folded_bytes_ = priced.bytes;
  return Status::Ok();
}

void RunTiming::AddEpoch(MessageLog& log) {
  if (!asynchronous_) return;  // a synchronous step's collectives were counted with it
  collective_bytes_ += log.TotalBytes();
  log.Clear();
}

Status RunTiming::Finish(TrainReport& report) const {
  report.collective_bytes = collective_bytes_;
  report.folded_reduction = folded_costs_.has_value();
  report.collectives_not_simulated = folded_not_priced_;
  report.staleness = staleness_;
  report.simulated_seconds = asynchronous_ ? asynchronous_seconds_ : timeline_.total_seconds();
  report.simulated_collective_seconds = asynchronous_ ? 0.0 : timeline_.collective_seconds();
  if (config_->trace_path.empty()) return Status::Ok();
  TraceWriter writer;
  if (asynchronous_) {
    // One track per worker: each update's span from pull to push, named with its staleness.
    for (const ParameterServerUpdate& u : traced_updates_)
      writer.AddSpan(u.worker,
                     "update " + std::to_string(u.update) + " (staleness " + std::to_string(u.staleness) + ")",
                     "compute", u.start_seconds, u.finish_seconds - u.start_seconds,
                     {{"staleness", u.staleness}, {"examples", u.examples}});
    return writer.WriteFile(config_->trace_path);
  }
  // The trace shows the first steps: their compute and every phase and message.
  SimulatedTimeline trace_timeline(config_->cluster.replicas);
  for (std::size_t step = 0; step < traced_compute_.size(); ++step)
    for (std::int32_t r = 0; r < config_->cluster.replicas; ++r)
      DTLAB_RETURN_IF_ERROR(trace_timeline.AddCompute(
          static_cast<std::int64_t>(step) + 1 + std::max<std::int64_t>(report.resumed_from_step, 0), r,
          traced_compute_[step][static_cast<std::size_t>(r)]));
  for (const CollectiveRecord& record : traced_collectives_) {
    DTLAB_ASSIGN_OR_RETURN(CollectiveCost cost, EstimateCollective(record, topology_));
    trace_timeline.AddCollective(cost);
  }
  DTLAB_RETURN_IF_ERROR(AddTimelineToTrace(trace_timeline, traced_collectives_, writer));
  return writer.WriteFile(config_->trace_path);
}

}  // namespace dtlab
