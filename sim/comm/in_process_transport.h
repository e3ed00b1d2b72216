// InProcessTransport: the transport (sim/comm/transport.h) of replicas in one process,
// each owning its buffers; collectives.cc runs every collective over it. It knows
// nothing of faults: injected dead replicas, dropped and corrupted messages come
// from FaultyTransport (sim/comm/faulty_transport.h), which collectives.cc wraps
// around it when faults are set.
//
// Included by sim/comm/collectives.cc only.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "sim/comm/combine.h"
#include "sim/comm/message_log.h"
#include "sim/comm/transport.h"

namespace dtlab {

// Transfers longer than this many bytes are cut into blocks that run as separate
// tasks, so that two threads share even a phase of one transfer. The cut never
// changes which addends meet in which order: every element is summed whole by one
// task.
inline constexpr std::int64_t kInProcessBlockBytes = 64 * 1024;

// The replicas' buffers of a collective: inputs[i] and outputs[i] may be the
// same memory (in place) or not (out of place: inputs are then only read).
template <typename T>
struct ReplicaBuffers {
  std::vector<const T*> inputs;
  std::vector<T*> outputs;
  std::int64_t count = 0;
  std::int32_t num_replicas() const { return static_cast<std::int32_t>(inputs.size()); }
};

// InProcessTransport carries out one bulk-synchronous phase at a time between
// replicas of this process, each owning its buffers (the Transport of sim/comm/transport.h).
//
// A phase is a list of transfers. A transfer is carried out by one replica, its
// combiner: it reads `count` elements from each of its sources (its own buffer or a
// peer's: a peer's is a message peer -> combiner), sums them in the order they were
// added, divides the sum by the replica count if asked (MEAN), and stores the
// result in each destination (its own buffer, or a peer's: a message combiner ->
// peer). A source or destination names the phase its message belongs to, so a
// combiner may forward a result in the phase after the one it received it in; the
// direct schedule uses this to store the reduced chunk into every replica in the
// same pass that computes it (see docs/collectives.md, "direct").
//
// REQUIRES of a phase (checked in debug builds): no two transfers write
// overlapping memory, and no transfer writes memory that another one reads. So the
// transfers and the blocks of each can run in any order on any thread, and the
// result is the same bits.
template <typename T>
class InProcessTransport final : public Transport<T> {
 public:
  InProcessTransport(const ReplicaBuffers<T>& buffers, MessageLog* log)
      : buffers_(buffers), divisor_(MeanDivisor<T>(buffers.num_replicas())), log_(log) {}

  std::int32_t num_replicas() const override { return buffers_.num_replicas(); }

  /// Starts a transfer of `count` elements carried out by replica `combiner`. An
  /// empty transfer is dropped, with its sources and destinations.
  void BeginTransfer(std::int32_t combiner, std::int64_t count, bool divide) override {
    dropping_ = count == 0;
    if (dropping_) return;
    Transfer transfer;
    transfer.combiner = combiner;
    transfer.count = count;
    transfer.divide = divide;
    transfer.first_source = sources_.size();
    transfer.first_destination = destinations_.size();
    transfers_.push_back(transfer);
  }
  /// Adds an addend of the current transfer; addends are summed in call order.
  void AddSource(std::int32_t replica, BufferRole role, std::int64_t offset, std::int32_t phase) override {
    if (dropping_) return;
    sources_.push_back({replica, phase, SourceData(replica, role, offset)});
    ++transfers_.back().num_sources;
  }
  /// Adds a place the current transfer's result is stored to.
  void AddDestination(std::int32_t replica, std::int64_t offset, std::int32_t phase) override {
    if (dropping_) return;
    destinations_.push_back({replica, phase, buffers_.outputs[replica] + offset});
    ++transfers_.back().num_destinations;
  }

  /// Records the phase's messages, carries out its transfers, and starts a new
  /// phase. Returns once every transfer is done (the end of the phase).
  void Run() override {
    if (log_ != nullptr) RecordMessages();
#ifndef NDEBUG
    CheckNoConflicts();
#endif
    tasks_.clear();
    constexpr std::int64_t kBlock =
        std::max<std::int64_t>(kInProcessBlockBytes / static_cast<std::int64_t>(sizeof(T)), 1);
    for (std::size_t t = 0; t < transfers_.size(); ++t)
      for (std::int64_t begin = 0; begin < transfers_[t].count; begin += kBlock)
        tasks_.push_back({t, begin, std::min(begin + kBlock, transfers_[t].count)});
    if (tasks_.size() == 1) {
      RunTask(tasks_[0]);
    } else if (!tasks_.empty()) {
      tbb::parallel_for(tbb::blocked_range<std::size_t>(0, tasks_.size()), [this](const auto& range) {
        for (std::size_t i = range.begin(); i != range.end(); ++i) RunTask(tasks_[i]);
      });
    }
    transfers_.clear();
    sources_.clear();
    destinations_.clear();
  }

  const T* SourceData(std::int32_t replica, BufferRole role, std::int64_t offset) const override {
    return (role == BufferRole::kInput ? buffers_.inputs[replica] : buffers_.outputs[replica]) + offset;
  }

 private:
  struct Source {
    std::int32_t replica;
    std::int32_t phase;
    const T* data;
  };
  struct Destination {
    std::int32_t replica;
    std::int32_t phase;
    T* data;
  };
  struct Transfer {
    std::int32_t combiner = 0;
    bool divide = false;
    std::int64_t count = 0;
    std::size_t first_source = 0, num_sources = 0;
    std::size_t first_destination = 0, num_destinations = 0;
  };
  struct Task {
    std::size_t transfer;
    std::int64_t begin, end;  // elements of the transfer
  };

  void RecordMessages() {
    for (const Transfer& t : transfers_) {
      const std::int64_t bytes = t.count * static_cast<std::int64_t>(sizeof(T));
      for (std::size_t s = t.first_source; s < t.first_source + t.num_sources; ++s)
        if (sources_[s].replica != t.combiner)
          log_->Record({sources_[s].phase, sources_[s].replica, t.combiner, bytes});
      for (std::size_t d = t.first_destination; d < t.first_destination + t.num_destinations; ++d)
        if (destinations_[d].replica != t.combiner)
          log_->Record({destinations_[d].phase, t.combiner, destinations_[d].replica, bytes});
    }
  }

  // Elements [begin, end) of one transfer (sim/comm/combine.h).
  void RunTask(const Task& task) const {
    const Transfer& t = transfers_[task.transfer];
    const Source* sources = sources_.data() + t.first_source;
    const Destination* destinations = destinations_.data() + t.first_destination;
    CombineRange<T>(
        t.num_sources, [sources](std::size_t s) { return sources[s].data; }, t.num_destinations,
        [destinations](std::size_t d) { return destinations[d].data; }, task.begin, task.end, t.divide, divisor_);
  }

#ifndef NDEBUG
  // The REQUIRES of the class comment: written ranges are disjoint, and no
  // transfer reads a range another one writes.
  void CheckNoConflicts() const {
    struct Span {
      std::uintptr_t begin, end;
      std::size_t transfer;
    };
    std::vector<Span> written, read;
    for (std::size_t t = 0; t < transfers_.size(); ++t) {
      const std::uintptr_t bytes = static_cast<std::uintptr_t>(transfers_[t].count) * sizeof(T);
      for (std::size_t d = 0; d < transfers_[t].num_destinations; ++d) {
        const auto at = reinterpret_cast<std::uintptr_t>(destinations_[transfers_[t].first_destination + d].data);
        written.push_back({at, at + bytes, t});
      }
      for (std::size_t s = 0; s < transfers_[t].num_sources; ++s) {
        const auto at = reinterpret_cast<std::uintptr_t>(sources_[transfers_[t].first_source + s].data);
        read.push_back({at, at + bytes, t});
      }
    }
    std::sort(written.begin(), written.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
    for (std::size_t i = 1; i < written.size(); ++i)
      assert(written[i - 1].end <= written[i].begin && "two writes of one phase overlap");
    for (const Span& r : read) {
      auto it = std::lower_bound(written.begin(), written.end(), r.end,
                                 [](const Span& w, std::uintptr_t end) { return w.begin < end; });
      while (it != written.begin()) {
        --it;
        if (it->end <= r.begin) break;
        assert(it->transfer == r.transfer && "a phase reads memory another transfer of it writes");
      }
    }
  }
#endif

  const ReplicaBuffers<T>& buffers_;
  T divisor_;
  MessageLog* log_;
  bool dropping_ = false;
  std::vector<Transfer> transfers_;
  std::vector<Source> sources_;
  std::vector<Destination> destinations_;
  std::vector<Task> tasks_;
};

}  // namespace dtlab
