#include "sim/comm/collectives.h"

#include <cassert>
#include <cstring>
#include <string>
#include <type_traits>

#include "sim/comm/all_reduce_algorithm.h"
#include "sim/comm/faulty_transport.h"
#include "sim/comm/in_process_transport.h"

namespace dtlab {

namespace {

// Emits a collective's phases (`emit(transport)`) over the in-process transport of
// `buffers`, wrapped in the injected message faults when options.faults is set.
template <typename T, typename Emit>
void OverTransport(const ReplicaBuffers<T>& buffers, const CollectiveOptions& options, Emit emit) {
  InProcessTransport<T> transport(buffers, options.log);
  if (options.faults == nullptr) {
    emit(static_cast<Transport<T>&>(transport));
    return;
  }
  FaultyTransport<T> faulty(transport, *options.faults);
  emit(static_cast<Transport<T>&>(faulty));
}

template <typename T>
void RunAllReduce(const ReplicaBuffers<T>& buffers, ReduceOp op, const CollectiveOptions& options) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int64_t> ||
                std::is_same_v<T, Int448>);
  assert((op == ReduceOp::kSum || std::is_floating_point_v<T>)&&"MEAN is only for floating-point types");
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
    OverTransport(buffers, options, [&](Transport<T>& transport) {
      ScheduleAllReduce<T>(transport, options.algorithm, buffers.count, op, options.replicas_per_worker);
    });
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
  algorithm.info().schedule(transport, {count, op == ReduceOp::kMean, replicas_per_worker});
}

void ScheduleReduce(ScheduleTransport& transport, std::int64_t count, std::int32_t root, bool divide) {
  const std::int32_t n = transport.num_replicas();
  for (std::int32_t owner = 0; owner < n; ++owner) {
    const ElementRange chunk = Chunk(count, n, owner);
    transport.BeginTransfer(owner, chunk.count, divide);
    for (std::int32_t r = 0; r < n; ++r) transport.AddSource(r, BufferRole::kInput, chunk.begin, 0);
    transport.AddDestination(root, chunk.begin, 1);
  }
  transport.Run();
}

void ScheduleBroadcast(ScheduleTransport& transport, std::int64_t count, std::int32_t root) {
  const std::int32_t n = transport.num_replicas();
  for (std::int32_t owner = 0; owner < n; ++owner) {
    const ElementRange chunk = Chunk(count, n, owner);
    transport.BeginTransfer(owner, chunk.count, false);
    transport.AddSource(root, BufferRole::kInput, chunk.begin, 0);
    for (std::int32_t r = 0; r < n; ++r)
      if (r != root) transport.AddDestination(r, chunk.begin, 1);
  }
  transport.Run();
}

namespace {
// The replicas per worker of a schedule over `workers` workers' slices.
std::int32_t ReplicasPerWorker(const ScheduleTransport& transport, std::int32_t replicas_per_worker,
                               [[maybe_unused]] std::int32_t workers) {
  const std::int32_t per = replicas_per_worker > 0 ? replicas_per_worker : transport.num_replicas();
  assert(per * workers == transport.num_replicas());
  return per;
}
}  // namespace

void ScheduleReduceScatterSlices(ScheduleTransport& transport, std::int32_t replicas_per_worker, std::int64_t count,
                                 std::span<const ElementRange> slices, OwnSlice own) {
  const auto workers = static_cast<std::int32_t>(slices.size());
  const std::int32_t per = ReplicasPerWorker(transport, replicas_per_worker, workers);
  assert(own == OwnSlice::kSummed || per == 1);
  std::int32_t phase = 0;
  if (per > 1) {
    for (std::int32_t w = 0; w < workers; ++w) {
      transport.BeginTransfer(w * per, count, false);
      for (std::int32_t r = w * per; r < (w + 1) * per; ++r) transport.AddSource(r, BufferRole::kInput, 0, phase);
      transport.AddDestination(w * per, 0, phase);
    }
    transport.Run();
    ++phase;
  }
  if (workers < 2) return;
  for (std::int32_t w = 0; w < workers; ++w) {
    const ElementRange slice = slices[static_cast<std::size_t>(w)];
    transport.BeginTransfer(w * per, slice.count, false);
    for (std::int32_t v = 0; v < workers; ++v)
      if (v != w || own == OwnSlice::kSummed)
        transport.AddSource(v * per, per > 1 ? BufferRole::kOutput : BufferRole::kInput, slice.begin, phase);
    transport.AddDestination(w * per, slice.begin, phase);
  }
  transport.Run();
}

void ScheduleAllGatherSlices(ScheduleTransport& transport, std::int32_t replicas_per_worker,
                             std::span<const ElementRange> slices) {
  const auto workers = static_cast<std::int32_t>(slices.size());
  const std::int32_t per = ReplicasPerWorker(transport, replicas_per_worker, workers);
  std::int32_t phase = 0;
  if (workers > 1) {
    for (std::int32_t w = 0; w < workers; ++w) {
      const ElementRange slice = slices[static_cast<std::size_t>(w)];
      transport.BeginTransfer(w * per, slice.count, false);
      transport.AddSource(w * per, BufferRole::kInput, slice.begin, phase);
      for (std::int32_t v = 0; v < workers; ++v)
        if (v != w) transport.AddDestination(v * per, slice.begin, phase);
    }
    transport.Run();
    ++phase;
  }
  if (per > 1 && !slices.empty()) {
    const std::int64_t count = slices.back().begin + slices.back().count;
    for (std::int32_t w = 0; w < workers; ++w) {
      transport.BeginTransfer(w * per, count, false);
      transport.AddSource(w * per, BufferRole::kInput, 0, phase);
      for (std::int32_t r = w * per + 1; r < (w + 1) * per; ++r) transport.AddDestination(r, 0, phase);
    }
    transport.Run();
  }
}

template <typename T>
void RunSchedule(std::span<const std::span<T>> buffers, const char* name, const CollectiveOptions& options,
                 const std::function<void(Transport<T>&)>& emit) {
  assert(!buffers.empty());
  CheckSameSizes(buffers, buffers[0].size());
  BeginRecord<T>(options, name, buffers.size(), buffers[0].size());
  if (buffers.size() > 1) OverTransport(InPlace(buffers), options, emit);
  if (options.log != nullptr) options.log->End();
}

template void RunSchedule<float>(std::span<const std::span<float>>, const char*, const CollectiveOptions&,
                                 const std::function<void(Transport<float>&)>&);
template void RunSchedule<std::int64_t>(std::span<const std::span<std::int64_t>>, const char*, const CollectiveOptions&,
                                        const std::function<void(Transport<std::int64_t>&)>&);
template void RunSchedule<Int448>(std::span<const std::span<Int448>>, const char*, const CollectiveOptions&,
                                  const std::function<void(Transport<Int448>&)>&);

template <typename T>
void RunSchedule(std::span<const std::span<const T>> inputs, std::span<const std::span<T>> outputs, const char* name,
                 const CollectiveOptions& options, const std::function<void(Transport<T>&)>& emit) {
  assert(!outputs.empty() && inputs.size() == outputs.size());
  CheckSameSizes(outputs, outputs[0].size());
  CheckSameSizes(inputs, outputs[0].size());
  BeginRecord<T>(options, name, outputs.size(), outputs[0].size());
  if (outputs.size() > 1) OverTransport(OutOfPlace(inputs, outputs), options, emit);
  if (options.log != nullptr) options.log->End();
}

template void RunSchedule<std::int64_t>(std::span<const std::span<const std::int64_t>>,
                                        std::span<const std::span<std::int64_t>>, const char*, const CollectiveOptions&,
                                        const std::function<void(Transport<std::int64_t>&)>&);

namespace {

// A transport that moves nothing: it records the messages a schedule would send,
// as InProcessTransport does (a source or destination other than the combiner is a
// message of the transfer's bytes; an empty transfer sends nothing).
class RecordingTransport final : public ScheduleTransport {
 public:
  RecordingTransport(std::int32_t replicas, std::int64_t element_bytes, MessageLog& log)
      : replicas_(replicas), element_bytes_(element_bytes), log_(&log) {}
  std::int32_t num_replicas() const override { return replicas_; }
  void BeginTransfer(std::int32_t combiner, std::int64_t count, bool /*divide*/) override {
    combiner_ = combiner;
    bytes_ = count * element_bytes_;
  }
  void AddSource(std::int32_t replica, BufferRole /*role*/, std::int64_t /*offset*/, std::int32_t phase) override {
    if (bytes_ > 0 && replica != combiner_) log_->Record({phase, replica, combiner_, bytes_});
  }
  void AddDestination(std::int32_t replica, std::int64_t /*offset*/, std::int32_t phase) override {
    if (bytes_ > 0 && replica != combiner_) log_->Record({phase, combiner_, replica, bytes_});
  }
  void Run() override {}

 private:
  std::int32_t replicas_;
  std::int64_t element_bytes_;
  MessageLog* log_;
  std::int32_t combiner_ = 0;
  std::int64_t bytes_ = 0;
};

}  // namespace

CollectiveRecord RecordSchedule(std::string name, std::int32_t replicas, std::int64_t count, std::int64_t element_bytes,
                                const std::function<void(ScheduleTransport&)>& emit) {
  MessageLog log;
  log.Begin(std::move(name), 0, replicas, count * element_bytes);
  if (replicas > 1) {
    RecordingTransport transport(replicas, element_bytes, log);
    emit(transport);
  }
  log.End();
  return log.collectives().front();
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
// sends it to the root (phase 1), in one pass as in the direct all-reduce (sim/comm/all_reduce_direct.cc).
template <typename T>
void Reduce(std::span<const std::span<T>> buffers, std::int32_t root, ReduceOp op, const CollectiveOptions& options) {
  assert((op == ReduceOp::kSum || std::is_floating_point_v<T>)&&"MEAN is only for floating-point types");
  const std::int32_t n = static_cast<std::int32_t>(buffers.size());
  assert(n >= 1 && root >= 0 && root < n);
  CheckSameSizes(buffers, buffers[0].size());
  const std::int64_t count = static_cast<std::int64_t>(buffers[0].size());
  BeginRecord<T>(options, "reduce", buffers.size(), buffers[0].size());
  if (n > 1)
    OverTransport(InPlace(buffers), options,
                  [&](Transport<T>& runner) { ScheduleReduce(runner, count, root, op == ReduceOp::kMean); });
  if (options.log != nullptr) options.log->End();
}

// Direct (scatter then all-gather): the root sends chunk i to replica i (phase 0),
// which sends it to every other replica (phase 1); the root's own chunk goes out
// in phase 1. One pass, as in the direct all-reduce.
template <typename T>
void Broadcast(std::span<const std::span<T>> buffers, std::int32_t root, const CollectiveOptions& options) {
  const std::int32_t n = static_cast<std::int32_t>(buffers.size());
  assert(n >= 1 && root >= 0 && root < n);
  CheckSameSizes(buffers, buffers[0].size());
  const std::int64_t count = static_cast<std::int64_t>(buffers[0].size());
  BeginRecord<T>(options, "broadcast", buffers.size(), buffers[0].size());
  if (n > 1)
    OverTransport(InPlace(buffers), options, [&](Transport<T>& runner) { ScheduleBroadcast(runner, count, root); });
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
  OverTransport(OutOfPlace(inputs, outputs), options, [&](Transport<T>& runner) {
    for (std::int32_t sender = 0; sender < n; ++sender) {
      runner.BeginTransfer(sender, static_cast<std::int64_t>(count), false);
      runner.AddSource(sender, BufferRole::kInput, 0, 0);
      for (std::int32_t r = 0; r < n; ++r)
        runner.AddDestination(r, static_cast<std::int64_t>(static_cast<std::size_t>(sender) * count), 0);
    }
    runner.Run();
  });
  if (options.log != nullptr) options.log->End();
}

// Direct: replica i sums block i of every replica's input in replica order, in one
// phase.
template <typename T>
void ReduceScatter(std::span<const std::span<const T>> inputs, std::span<const std::span<T>> outputs, ReduceOp op,
                   const CollectiveOptions& options) {
  assert((op == ReduceOp::kSum || std::is_floating_point_v<T>)&&"MEAN is only for floating-point types");
  const std::int32_t n = static_cast<std::int32_t>(inputs.size());
  assert(n >= 1 && outputs.size() == inputs.size());
  const std::size_t count = outputs[0].size();
  CheckSameSizes(outputs, count);
  CheckSameSizes(inputs, count * inputs.size());
  BeginRecord<T>(options, "reduce_scatter", inputs.size(), count * inputs.size());
  OverTransport(OutOfPlace(inputs, outputs), options, [&](Transport<T>& runner) {
    for (std::int32_t owner = 0; owner < n; ++owner) {
      runner.BeginTransfer(owner, static_cast<std::int64_t>(count), op == ReduceOp::kMean && n > 1);
      for (std::int32_t r = 0; r < n; ++r)
        runner.AddSource(r, BufferRole::kInput, static_cast<std::int64_t>(static_cast<std::size_t>(owner) * count), 0);
      runner.AddDestination(owner, 0, 0);
    }
    runner.Run();
  });
  if (options.log != nullptr) options.log->End();
}

#define DTLAB_INSTANTIATE_COLLECTIVES(T)                                                                       \
  template void ScheduleAllReduce<T>(Transport<T>&, AllReduceAlgorithm, std::int64_t, ReduceOp, std::int32_t); \
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
DTLAB_INSTANTIATE_COLLECTIVES(Int448)

#undef DTLAB_INSTANTIATE_COLLECTIVES

}  // namespace dtlab
