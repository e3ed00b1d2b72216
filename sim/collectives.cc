#include "sim/collectives.h"

#include "core/enum_names.h"
#include "core/exact_sum.h"
#include "sim/combine.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstdio>
#include <cstring>
#include <functional>
#include <type_traits>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <zlib.h>

namespace dtlab {

namespace {
constexpr NameTable<AllReduceAlgorithm, 5> kAlgorithmNames = {{
    {"ring", AllReduceAlgorithm::kRing},
    {"tree", AllReduceAlgorithm::kTree},
    {"naive", AllReduceAlgorithm::kNaive},
    {"hierarchical", AllReduceAlgorithm::kHierarchical},
    {"direct", AllReduceAlgorithm::kDirect},
}};
}  // namespace

StatusOr<AllReduceAlgorithm> ParseAllReduceAlgorithm(std::string_view name) {
  return ParseEnumName(name, kAlgorithmNames, "all-reduce algorithm");
}

std::string_view AllReduceAlgorithmName(AllReduceAlgorithm algorithm) { return EnumName(algorithm, kAlgorithmNames); }

namespace {

// Transfers longer than this many bytes are cut into blocks that run as separate
// tasks, so that two threads share even a phase of one transfer. The cut never
// changes which addends meet in which order: every element is summed whole by one
// task.
constexpr std::int64_t kBlockBytes = 64 * 1024;

// Chunk `index` of `parts` near-equal chunks of `count` elements: the first
// count % parts chunks hold one element more than the others.
struct ElementRange {
  std::int64_t begin = 0;
  std::int64_t count = 0;
};
std::int64_t ChunkBegin(std::int64_t count, std::int64_t parts, std::int64_t index) {
  return index * (count / parts) + std::min(index, count % parts);
}
ElementRange Chunk(std::int64_t count, std::int64_t parts, std::int64_t index) {
  const std::int64_t begin = ChunkBegin(count, parts, index);
  return {begin, ChunkBegin(count, parts, index + 1) - begin};
}
// Blocks [first_block, end_block) of `parts` near-equal chunks, as elements.
ElementRange Blocks(std::int64_t count, std::int64_t parts, std::int64_t first_block, std::int64_t end_block) {
  const std::int64_t begin = ChunkBegin(count, parts, first_block);
  return {begin, ChunkBegin(count, parts, end_block) - begin};
}

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
// replicas of this process, each owning its buffers (the Transport of sim/transport.h).
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
  InProcessTransport(const ReplicaBuffers<T>& buffers, MessageLog* log, MessageFaults* faults = nullptr)
      : buffers_(buffers), divisor_(static_cast<T>(buffers.num_replicas())), log_(log), faults_(faults) {}

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
    const T* data = (role == BufferRole::kInput ? buffers_.inputs[replica] : buffers_.outputs[replica]) + offset;
    sources_.push_back({replica, phase, data});
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
    if (faults_ != nullptr && !InjectFaults()) {  // a failed collective moves nothing more
      transfers_.clear();
      sources_.clear();
      destinations_.clear();
      return;
    }
    if (log_ != nullptr) RecordMessages();
#ifndef NDEBUG
    CheckNoConflicts();
#endif
    tasks_.clear();
    constexpr std::int64_t kBlock = std::max<std::int64_t>(kBlockBytes / static_cast<std::int64_t>(sizeof(T)), 1);
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

  // Fault injection (sim/faults.h), before the phase moves data. Returns false when
  // the collective failed: a message from or to a dead replica, or a dropped one,
  // never completes, so its receiver times out; a corrupted message (one bit flipped
  // in flight) fails the receiver's CRC-32 check.
  bool InjectFaults() {
    MessageFaults& f = *faults_;
    if (f.failed()) return false;
    char timeout[32];
    std::snprintf(timeout, sizeof timeout, "%g", f.timeout_seconds);
    auto message = [](std::int32_t phase, std::int32_t sender, std::int32_t receiver, std::int64_t count) {
      return "the message replica " + std::to_string(sender) + " -> replica " + std::to_string(receiver) +
             " of phase " + std::to_string(phase + 1) + " (" + std::to_string(count) + " elements)";
    };
    // Each message once: (phase, sender, receiver, transfer, source or destination index).
    auto check = [&](std::int32_t phase, std::int32_t sender, std::int32_t receiver, std::size_t t, std::size_t index,
                     bool is_source) {
      const std::int64_t count = transfers_[t].count;
      for (const std::int32_t r : {sender, receiver})
        if (r < static_cast<std::int32_t>(f.dead.size()) && f.dead[static_cast<std::size_t>(r)]) {
          f.Fail("timed out after " + std::string(timeout) + " s waiting for replica " + std::to_string(r) +
                 ", which stopped responding (" + message(phase, sender, receiver, count) + ")");
          return;
        }
      for (FaultSpec& spec : f.messages) {
        if (spec.step != f.step || spec.replica != sender || (spec.to >= 0 && spec.to != receiver) ||
            (spec.phase > 0 && spec.phase != phase + 1))
          continue;
        spec.step = -1;  // a fault hits one message
        if (spec.kind == FaultKind::kDrop) {
          f.Fail(message(phase, sender, receiver, count) + " was dropped and never arrived; replica " +
                 std::to_string(receiver) + " timed out after " + timeout + " s");
          return;
        }
        // The sender's CRC-32 of the payload against the receiver's of what arrived.
        // (A message combiner -> peer carries the combiner's sum; its first addend
        // stands in for it here: same size, and the check fails either way.)
        const T* payload = is_source ? sources_[index].data : sources_[transfers_[t].first_source].data;
        std::vector<T> sent(payload, payload + count), received = sent;
        FlipBit(received.data(), count);
        char crcs[64];
        std::snprintf(crcs, sizeof crcs, "CRC-32 %08lx sent, %08lx received", Crc(sent), Crc(received));
        f.Fail(message(phase, sender, receiver, count) + " arrived corrupted (" + crcs + ")");
        return;
      }
    };
    for (std::size_t t = 0; t < transfers_.size() && !f.failed(); ++t) {
      const Transfer& transfer = transfers_[t];
      for (std::size_t s = transfer.first_source; s < transfer.first_source + transfer.num_sources; ++s)
        if (sources_[s].replica != transfer.combiner)
          check(sources_[s].phase, sources_[s].replica, transfer.combiner, t, s, true);
      for (std::size_t d = transfer.first_destination; d < transfer.first_destination + transfer.num_destinations; ++d)
        if (destinations_[d].replica != transfer.combiner)
          check(destinations_[d].phase, transfer.combiner, destinations_[d].replica, t, d, false);
    }
    return !f.failed();
  }
  // Flips one bit that changes the value: the top mantissa bit of a float, bit 31
  // of each of the first accumulator words of an integer payload.
  static void FlipBit(T* data, std::int64_t count) {
    if (count <= 0) return;
    if constexpr (std::is_floating_point_v<T>) {
      using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
      Bits bits;
      std::memcpy(&bits, data, sizeof bits);
      bits ^= Bits{1} << (sizeof(T) == 4 ? 22 : 51);
      std::memcpy(data, &bits, sizeof bits);
    } else {
      for (std::int64_t i = 0; i < std::min<std::int64_t>(count, kExactWords); ++i) data[i] ^= T{1} << 31;
    }
  }
  static unsigned long Crc(const std::vector<T>& payload) {
    return crc32(0L, reinterpret_cast<const Bytef*>(payload.data()), static_cast<uInt>(payload.size() * sizeof(T)));
  }

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

  // Elements [begin, end) of one transfer (sim/combine.h).
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
  MessageFaults* faults_;
  bool dropping_ = false;
  std::vector<Transfer> transfers_;
  std::vector<Source> sources_;
  std::vector<Destination> destinations_;
  std::vector<Task> tasks_;
};


// Ring all-reduce among `members` (replica ids, in ring order; size M >= 2), whose
// buffers are inputs[m] and outputs[m]; it uses phases first_phase ..
// first_phase + 2(M-1) - 1. Reduce-scatter: in step p member r sends chunk
// (r-1-p) mod M to member r+1, which adds its own input chunk; chunk c is summed
// ((x[c+1] + x[c+2]) + ...) + x[c] (members mod M) and ends at member c.
// All-gather: in step p member r sends chunk (r-p) mod M to member r+1.
template <typename T>
void RingAllReduce(Transport<T>& runner, std::span<const std::int32_t> members, BufferRole input_role,
                   std::int64_t count, bool divide, std::int32_t first_phase) {
  const std::int32_t m = static_cast<std::int32_t>(members.size());
  for (std::int32_t step = 0; step < m - 1; ++step) {
    const std::int32_t phase = first_phase + step;
    for (std::int32_t sender = 0; sender < m; ++sender) {
      const std::int32_t receiver = (sender + 1) % m;
      const ElementRange chunk = Chunk(count, m, ((sender - 1 - step) % m + m) % m);
      // In the first step the sender's chunk is still its input; later it is the
      // partial sum the sender received in the previous step.
      runner.BeginTransfer(members[receiver], chunk.count, divide && step == m - 2);
      runner.AddSource(members[sender], step == 0 ? input_role : BufferRole::kOutput, chunk.begin, phase);
      runner.AddSource(members[receiver], input_role, chunk.begin, phase);
      runner.AddDestination(members[receiver], chunk.begin, phase);
    }
    runner.Run();
  }
  for (std::int32_t step = 0; step < m - 1; ++step) {
    const std::int32_t phase = first_phase + m - 1 + step;
    for (std::int32_t sender = 0; sender < m; ++sender) {
      const std::int32_t receiver = (sender + 1) % m;
      const ElementRange chunk = Chunk(count, m, ((sender - step) % m + m) % m);
      runner.BeginTransfer(members[receiver], chunk.count, false);
      runner.AddSource(members[sender], BufferRole::kOutput, chunk.begin, phase);
      runner.AddDestination(members[receiver], chunk.begin, phase);
    }
    runner.Run();
  }
}

// Recursive halving (reduce-scatter) then recursive doubling (all-gather), after
// Rabenseifner, with MPICH's folding for N that is not a power of two: with P the
// largest power of two <= N and E = N - P, replica 2i (i < E) first sends its whole
// buffer to 2i+1 and sits out; the P others run the power-of-two algorithm as
// virtual ranks; at the end 2i+1 sends the whole result back to 2i.
template <typename T>
void TreeAllReduce(Transport<T>& runner, std::int64_t count, bool divide) {
  const std::int32_t n = runner.num_replicas();
  const std::int32_t powered = static_cast<std::int32_t>(std::bit_floor(static_cast<std::uint32_t>(n)));
  const std::int32_t extra = n - powered;
  auto replica_of = [extra](std::int32_t virtual_rank) {
    return virtual_rank < extra ? 2 * virtual_rank + 1 : virtual_rank + extra;
  };
  std::int32_t phase = 0;
  if (extra > 0) {
    for (std::int32_t i = 0; i < extra; ++i) {
      runner.BeginTransfer(2 * i + 1, count, false);
      runner.AddSource(2 * i, BufferRole::kInput, 0, phase);
      runner.AddSource(2 * i + 1, BufferRole::kInput, 0, phase);
      runner.AddDestination(2 * i + 1, 0, phase);
    }
    runner.Run();
    ++phase;
  }
  // Where each virtual rank's data lives: its output once it has received anything.
  std::vector<BufferRole> current(static_cast<std::size_t>(powered));
  for (std::int32_t v = 0; v < powered; ++v) current[v] = v < extra ? BufferRole::kOutput : BufferRole::kInput;
  // Each virtual rank's segment, in blocks of `powered` near-equal blocks: it halves
  // in every step of the reduce-scatter and ends as block v.
  std::vector<std::int32_t> segment_begin(static_cast<std::size_t>(powered), 0);
  std::vector<std::int32_t> segment_end(static_cast<std::size_t>(powered), powered);
  for (std::int32_t mask = powered / 2; mask >= 1; mask /= 2, ++phase) {
    for (std::int32_t v = 0; v < powered; ++v) {
      const std::int32_t partner = v ^ mask;
      const std::int32_t middle = (segment_begin[v] + segment_end[v]) / 2;
      if (v & mask) {
        segment_begin[v] = middle;
      } else {
        segment_end[v] = middle;
      }
      const ElementRange kept = Blocks(count, powered, segment_begin[v], segment_end[v]);
      const std::int32_t lower = std::min(v, partner), upper = std::max(v, partner);
      runner.BeginTransfer(replica_of(v), kept.count, divide && mask == 1);
      runner.AddSource(replica_of(lower), current[lower], kept.begin, phase);
      runner.AddSource(replica_of(upper), current[upper], kept.begin, phase);
      runner.AddDestination(replica_of(v), kept.begin, phase);
    }
    runner.Run();
    for (std::int32_t v = 0; v < powered; ++v) current[v] = BufferRole::kOutput;
  }
  for (std::int32_t mask = 1; mask < powered; mask *= 2, ++phase) {
    for (std::int32_t v = 0; v < powered; ++v) {
      const std::int32_t partner = v ^ mask;
      const std::int32_t first_block = v / mask * mask;
      const ElementRange segment = Blocks(count, powered, first_block, first_block + mask);
      runner.BeginTransfer(replica_of(partner), segment.count, false);
      runner.AddSource(replica_of(v), BufferRole::kOutput, segment.begin, phase);
      runner.AddDestination(replica_of(partner), segment.begin, phase);
    }
    runner.Run();
  }
  if (extra > 0) {
    for (std::int32_t i = 0; i < extra; ++i) {
      runner.BeginTransfer(2 * i, count, false);
      runner.AddSource(2 * i + 1, BufferRole::kOutput, 0, phase);
      runner.AddDestination(2 * i, 0, phase);
    }
    runner.Run();
  }
}

// Phase 0: every replica sends its buffer to replica 0, which sums x0 + x1 + ... in
// replica order. Phase 1: replica 0 sends the result to every other replica.
template <typename T>
void NaiveAllReduce(Transport<T>& runner, std::int64_t count, bool divide) {
  const std::int32_t n = runner.num_replicas();
  runner.BeginTransfer(0, count, divide);
  for (std::int32_t r = 0; r < n; ++r) runner.AddSource(r, BufferRole::kInput, 0, 0);
  runner.AddDestination(0, 0, 0);
  runner.Run();
  runner.BeginTransfer(0, count, false);
  runner.AddSource(0, BufferRole::kOutput, 0, 1);
  for (std::int32_t r = 1; r < n; ++r) runner.AddDestination(r, 0, 1);
  runner.Run();
}

// Within each worker of R replicas, the members send to the worker's first replica
// (its leader), which sums them in replica order; the W leaders run the ring; each
// leader sends the result to its members.
template <typename T>
void HierarchicalAllReduce(Transport<T>& runner, std::int64_t count, bool divide, std::int32_t replicas_per_worker) {
  const std::int32_t n = runner.num_replicas();
  const std::int32_t per_worker = replicas_per_worker == 0 ? n : replicas_per_worker;
  assert(per_worker > 0 && n % per_worker == 0 && "replicas_per_worker must divide the replica count");
  const std::int32_t workers = n / per_worker;
  std::int32_t phase = 0;
  if (per_worker > 1) {
    for (std::int32_t leader = 0; leader < n; leader += per_worker) {
      runner.BeginTransfer(leader, count, divide && workers == 1);
      for (std::int32_t r = leader; r < leader + per_worker; ++r) runner.AddSource(r, BufferRole::kInput, 0, phase);
      runner.AddDestination(leader, 0, phase);
    }
    runner.Run();
    ++phase;
  }
  if (workers > 1) {
    std::vector<std::int32_t> leaders;
    for (std::int32_t leader = 0; leader < n; leader += per_worker) leaders.push_back(leader);
    // The leaders' partial sums are in their outputs once the workers have reduced.
    RingAllReduce<T>(runner, leaders, per_worker > 1 ? BufferRole::kOutput : BufferRole::kInput, count, divide, phase);
    phase += 2 * (workers - 1);
  }
  if (per_worker > 1) {
    for (std::int32_t leader = 0; leader < n; leader += per_worker) {
      runner.BeginTransfer(leader, count, false);
      runner.AddSource(leader, BufferRole::kOutput, 0, phase);
      for (std::int32_t r = leader + 1; r < leader + per_worker; ++r) runner.AddDestination(r, 0, phase);
    }
    runner.Run();
  }
}

// Replica i sums chunk i of every replica in replica order (phase 0: a message from
// every peer) and stores it into chunk i of every replica (phase 1: a message to
// every peer). Both phases run in one pass, 256 bytes at a time: phase 1 only reads
// what phase 0 wrote to replica i's chunk i, and only writes chunk i of the
// others, which no other transfer of either phase touches, so interleaving them
// gives the same bits as doing them one after the other, and each element is read
// once and written once.
template <typename T>
void DirectAllReduce(Transport<T>& runner, std::int64_t count, bool divide) {
  const std::int32_t n = runner.num_replicas();
  for (std::int32_t owner = 0; owner < n; ++owner) {
    const ElementRange chunk = Chunk(count, n, owner);
    runner.BeginTransfer(owner, chunk.count, divide);
    for (std::int32_t r = 0; r < n; ++r) runner.AddSource(r, BufferRole::kInput, chunk.begin, 0);
    runner.AddDestination(owner, chunk.begin, 0);
    for (std::int32_t r = 0; r < n; ++r)
      if (r != owner) runner.AddDestination(r, chunk.begin, 1);
  }
  runner.Run();
}

template <typename T>
void RunAllReduce(const ReplicaBuffers<T>& buffers, ReduceOp op, const CollectiveOptions& options) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int64_t>);
  assert((op == ReduceOp::kSum || std::is_floating_point_v<T>) && "MEAN is only for floating-point types");
  const std::int32_t n = buffers.num_replicas();
  assert(n >= 1);
  if (options.log != nullptr)
    options.log->Begin("all_reduce/" + std::string(AllReduceAlgorithmName(options.algorithm)), options.step, n,
                       buffers.count * static_cast<std::int64_t>(sizeof(T)));
  if (n == 1) {
    // Nothing to send; the sum of one buffer divided by 1 is the buffer itself.
    if (buffers.outputs[0] != buffers.inputs[0] && buffers.count > 0)
      std::memcpy(buffers.outputs[0], buffers.inputs[0], static_cast<std::size_t>(buffers.count) * sizeof(T));
  } else {
    InProcessTransport<T> transport(buffers, options.log, options.faults);
    ScheduleAllReduce<T>(transport, options.algorithm, buffers.count, op, options.replicas_per_worker);
  }
  if (options.log != nullptr) options.log->End();
}

template <typename T>
void CheckSameSizes(std::span<const std::span<T>> buffers, std::size_t size) {
#ifndef NDEBUG
  for (const auto& buffer : buffers) assert(buffer.size() == size && "all buffers must have the same size");
#else
  (void)buffers;
  (void)size;
#endif
}

// The buffers of an in-place collective: each replica's input is its output.
template <typename T>
ReplicaBuffers<T> InPlace(std::span<const std::span<T>> buffers) {
  ReplicaBuffers<T> out;
  out.count = buffers.empty() ? 0 : static_cast<std::int64_t>(buffers[0].size());
  for (const auto& buffer : buffers) {
    out.inputs.push_back(buffer.data());
    out.outputs.push_back(buffer.data());
  }
  return out;
}

template <typename T>
ReplicaBuffers<T> OutOfPlace(std::span<const std::span<const T>> inputs, std::span<const std::span<T>> outputs) {
  ReplicaBuffers<T> out;
  out.count = inputs.empty() ? 0 : static_cast<std::int64_t>(inputs[0].size());
  for (std::size_t r = 0; r < inputs.size(); ++r) {
    out.inputs.push_back(inputs[r].data());
    out.outputs.push_back(outputs[r].data());
  }
  return out;
}

template <typename T>
void BeginRecord(const CollectiveOptions& options, const char* name, std::size_t num_replicas,
                 std::size_t elements_per_replica) {
  if (options.log != nullptr)
    options.log->Begin(name, options.step, static_cast<std::int32_t>(num_replicas),
                       static_cast<std::int64_t>(elements_per_replica * sizeof(T)));
}

}  // namespace

template <typename T>
void ScheduleAllReduce(Transport<T>& transport, AllReduceAlgorithm algorithm, std::int64_t count, ReduceOp op,
                       std::int32_t replicas_per_worker) {
  const std::int32_t n = transport.num_replicas();
  if (n <= 1) return;
  const bool divide = op == ReduceOp::kMean;
  switch (algorithm) {
    case AllReduceAlgorithm::kRing: {
      std::vector<std::int32_t> members(static_cast<std::size_t>(n));
      for (std::int32_t r = 0; r < n; ++r) members[static_cast<std::size_t>(r)] = r;
      RingAllReduce<T>(transport, members, BufferRole::kInput, count, divide, 0);
      break;
    }
    case AllReduceAlgorithm::kTree: TreeAllReduce(transport, count, divide); break;
    case AllReduceAlgorithm::kNaive: NaiveAllReduce(transport, count, divide); break;
    case AllReduceAlgorithm::kHierarchical: HierarchicalAllReduce(transport, count, divide, replicas_per_worker); break;
    case AllReduceAlgorithm::kDirect: DirectAllReduce(transport, count, divide); break;
  }
}

template <typename T>
void AllReduce(std::span<const std::span<T>> buffers, ReduceOp op, const CollectiveOptions& options) {
  assert(!buffers.empty());
  CheckSameSizes(buffers, buffers[0].size());
  RunAllReduce(InPlace(buffers), op, options);
}

template <typename T>
void AllReduce(std::span<const std::span<const T>> inputs, std::span<const std::span<T>> outputs, ReduceOp op,
               const CollectiveOptions& options) {
  assert(!inputs.empty() && inputs.size() == outputs.size());
  CheckSameSizes(inputs, inputs[0].size());
  CheckSameSizes(outputs, inputs[0].size());
  RunAllReduce(OutOfPlace(inputs, outputs), op, options);
}

// Direct: replica i sums chunk i of every replica in replica order (phase 0) and
// sends it to the root (phase 1), in one pass as in DirectAllReduce.
template <typename T>
void Reduce(std::span<const std::span<T>> buffers, std::int32_t root, ReduceOp op, const CollectiveOptions& options) {
  assert((op == ReduceOp::kSum || std::is_floating_point_v<T>) && "MEAN is only for floating-point types");
  const std::int32_t n = static_cast<std::int32_t>(buffers.size());
  assert(n >= 1 && root >= 0 && root < n);
  CheckSameSizes(buffers, buffers[0].size());
  const std::int64_t count = static_cast<std::int64_t>(buffers[0].size());
  BeginRecord<T>(options, "reduce", buffers.size(), buffers[0].size());
  if (n > 1) {
    const ReplicaBuffers<T> in_place = InPlace(buffers);
    InProcessTransport<T> runner(in_place, options.log, options.faults);
    for (std::int32_t owner = 0; owner < n; ++owner) {
      const ElementRange chunk = Chunk(count, n, owner);
      runner.BeginTransfer(owner, chunk.count, op == ReduceOp::kMean);
      for (std::int32_t r = 0; r < n; ++r) runner.AddSource(r, BufferRole::kInput, chunk.begin, 0);
      runner.AddDestination(root, chunk.begin, 1);
    }
    runner.Run();
  }
  if (options.log != nullptr) options.log->End();
}

// Direct (scatter then all-gather): the root sends chunk i to replica i (phase 0),
// which sends it to every other replica (phase 1); the root's own chunk goes out
// in phase 1. One pass, as in DirectAllReduce.
template <typename T>
void Broadcast(std::span<const std::span<T>> buffers, std::int32_t root, const CollectiveOptions& options) {
  const std::int32_t n = static_cast<std::int32_t>(buffers.size());
  assert(n >= 1 && root >= 0 && root < n);
  CheckSameSizes(buffers, buffers[0].size());
  const std::int64_t count = static_cast<std::int64_t>(buffers[0].size());
  BeginRecord<T>(options, "broadcast", buffers.size(), buffers[0].size());
  if (n > 1) {
    const ReplicaBuffers<T> in_place = InPlace(buffers);
    InProcessTransport<T> runner(in_place, options.log, options.faults);
    for (std::int32_t owner = 0; owner < n; ++owner) {
      const ElementRange chunk = Chunk(count, n, owner);
      runner.BeginTransfer(owner, chunk.count, false);
      runner.AddSource(root, BufferRole::kInput, chunk.begin, 0);
      for (std::int32_t r = 0; r < n; ++r)
        if (r != root) runner.AddDestination(r, chunk.begin, 1);
    }
    runner.Run();
  }
  if (options.log != nullptr) options.log->End();
}

// Direct: replica j sends its input to every replica in one phase.
template <typename T>
void AllGather(std::span<const std::span<const T>> inputs, std::span<const std::span<T>> outputs,
               const CollectiveOptions& options) {
  const std::int32_t n = static_cast<std::int32_t>(inputs.size());
  assert(n >= 1 && outputs.size() == inputs.size());
  const std::size_t count = inputs[0].size();
  CheckSameSizes(inputs, count);
  CheckSameSizes(outputs, count * inputs.size());
  BeginRecord<T>(options, "all_gather", inputs.size(), count * inputs.size());
  const ReplicaBuffers<T> buffers = OutOfPlace(inputs, outputs);
  InProcessTransport<T> runner(buffers, options.log, options.faults);
  for (std::int32_t sender = 0; sender < n; ++sender) {
    runner.BeginTransfer(sender, static_cast<std::int64_t>(count), false);
    runner.AddSource(sender, BufferRole::kInput, 0, 0);
    for (std::int32_t r = 0; r < n; ++r)
      runner.AddDestination(r, static_cast<std::int64_t>(static_cast<std::size_t>(sender) * count), 0);
  }
  runner.Run();
  if (options.log != nullptr) options.log->End();
}

// Direct: replica i sums block i of every replica's input in replica order, in one
// phase.
template <typename T>
void ReduceScatter(std::span<const std::span<const T>> inputs, std::span<const std::span<T>> outputs, ReduceOp op,
                   const CollectiveOptions& options) {
  assert((op == ReduceOp::kSum || std::is_floating_point_v<T>) && "MEAN is only for floating-point types");
  const std::int32_t n = static_cast<std::int32_t>(inputs.size());
  assert(n >= 1 && outputs.size() == inputs.size());
  const std::size_t count = outputs[0].size();
  CheckSameSizes(outputs, count);
  CheckSameSizes(inputs, count * inputs.size());
  BeginRecord<T>(options, "reduce_scatter", inputs.size(), count * inputs.size());
  const ReplicaBuffers<T> buffers = OutOfPlace(inputs, outputs);
  InProcessTransport<T> runner(buffers, options.log, options.faults);
  for (std::int32_t owner = 0; owner < n; ++owner) {
    runner.BeginTransfer(owner, static_cast<std::int64_t>(count), op == ReduceOp::kMean && n > 1);
    for (std::int32_t r = 0; r < n; ++r)
      runner.AddSource(r, BufferRole::kInput, static_cast<std::int64_t>(static_cast<std::size_t>(owner) * count), 0);
    runner.AddDestination(owner, 0, 0);
  }
  runner.Run();
  if (options.log != nullptr) options.log->End();
}

#define DTLAB_INSTANTIATE_COLLECTIVES(T)                                                                        \
  template void ScheduleAllReduce<T>(Transport<T>&, AllReduceAlgorithm, std::int64_t, ReduceOp, std::int32_t);  \
  template void AllReduce<T>(std::span<const std::span<T>>, ReduceOp, const CollectiveOptions&);               \
  template void AllReduce<T>(std::span<const std::span<const T>>, std::span<const std::span<T>>, ReduceOp,     \
                             const CollectiveOptions&);                                                        \
  template void Reduce<T>(std::span<const std::span<T>>, std::int32_t, ReduceOp, const CollectiveOptions&);    \
  template void Broadcast<T>(std::span<const std::span<T>>, std::int32_t, const CollectiveOptions&);           \
  template void AllGather<T>(std::span<const std::span<const T>>, std::span<const std::span<T>>,               \
                             const CollectiveOptions&);                                                        \
  template void ReduceScatter<T>(std::span<const std::span<const T>>, std::span<const std::span<T>>, ReduceOp, \
                                 const CollectiveOptions&);

DTLAB_INSTANTIATE_COLLECTIVES(float)
DTLAB_INSTANTIATE_COLLECTIVES(double)
DTLAB_INSTANTIATE_COLLECTIVES(std::int64_t)

#undef DTLAB_INSTANTIATE_COLLECTIVES

}  // namespace dtlab
