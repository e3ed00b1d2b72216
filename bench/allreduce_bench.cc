// Bandwidth of dtlab's all-reduce between replicas that own their buffers, with the
// columns of nccl-tests (doc/PERFORMANCE.md): algbw = bytes per replica / time and
// busbw = algbw * 2(N-1)/N, in GB/s (1e9 bytes), for every algorithm (hierarchical
// as two workers of N/2). Beside it, on 1 and 2 threads, a STREAM-like copy of a
// 64 MiB buffer (the copy bandwidth that caps the all-reduce; docs/performance.md
// derives the cap) and an in-place update of a 128 MiB buffer (the traffic
// pattern of an in-place all-reduce). bench/compare_allreduce.sh runs this with
// bench/mpi_allreduce.cc (OpenMPI) and prints the comparison.
//
// Run: build/release/bench/allreduce_bench [--benchmark_filter=AllReduce/direct]
#include <benchmark/benchmark.h>
#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/exact_sum.h"
#include "sim/comm/collectives.h"

namespace dtlab {
namespace {

constexpr std::int64_t kMiB = 1 << 20;

// A page-aligned float buffer, touched once so that no page fault lands in a
// timed iteration.
struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<float[], FreeDeleter>;
AlignedBuffer MakeBuffer(std::int64_t count, float value) {
  const std::size_t bytes = (static_cast<std::size_t>(count) * sizeof(float) + 4095) / 4096 * 4096;
  AlignedBuffer buffer(static_cast<float*>(std::aligned_alloc(4096, bytes)));
  std::fill(buffer.get(), buffer.get() + count, value);
  return buffer;
}

// Inputs of an in-place SUM benchmark: small nonzero normal floats, 2^-100 times
// 1..8 (bench/mpi_allreduce.cc fills the same). Each call multiplies them by about
// N, so they are filled again, untimed, before they could overflow.
void FillSmallValues(float* data, std::int64_t count, std::int32_t replica) {
  for (std::int64_t i = 0; i < count; ++i) data[i] = std::ldexp(static_cast<float>(1 + (i + replica) % 8), -100);
}
int CallsBeforeRefill(std::int32_t num_replicas) {
  return static_cast<int>(200 / std::log2(static_cast<double>(num_replicas)));  // 8 * 2^-100 * N^calls < 2^127
}

// nccl-tests' columns: algbw = bytes per replica / time, busbw = algbw x 2(N-1)/N.
void SetBusBandwidth(benchmark::State& state, std::int64_t bytes, std::int32_t n) {
  const double gigabytes = static_cast<double>(bytes) / 1e9;
  state.counters["algbw_GBps"] = benchmark::Counter(gigabytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["busbw_GBps"] =
      benchmark::Counter(gigabytes * 2.0 * (n - 1) / n, benchmark::Counter::kIsIterationInvariantRate);
}

// In place, float, SUM, every replica its own buffer.
void BM_AllReduce(benchmark::State& state, AllReduceAlgorithm algorithm) {
  const std::int64_t bytes = state.range(0) * kMiB;
  const std::int32_t n = static_cast<std::int32_t>(state.range(1));
  const std::int64_t count = bytes / static_cast<std::int64_t>(sizeof(float));
  std::vector<AlignedBuffer> storage;
  std::vector<std::span<float>> buffers;
  for (std::int32_t r = 0; r < n; ++r) {
    storage.push_back(MakeBuffer(count, 0.0f));
    buffers.emplace_back(storage.back().get(), static_cast<std::size_t>(count));
  }
  CollectiveOptions options;
  options.algorithm = algorithm;
  options.replicas_per_worker = n / 2;  // hierarchical: two workers
  int calls_left = 0;
  for (auto _ : state) {
    if (calls_left-- == 0) {
      state.PauseTiming();
      for (std::int32_t r = 0; r < n; ++r) FillSmallValues(buffers[r].data(), count, r);
      calls_left = CallsBeforeRefill(n) - 1;
      state.ResumeTiming();
    }
    AllReduce<float>(buffers, ReduceOp::kSum, options);
    benchmark::ClobberMemory();
  }
  SetBusBandwidth(state, bytes, n);
}

// Exact mode's all-reduce (docs/exact.md): int64 accumulator words, SUM, in place.
// Args: MiB of words per replica, replicas. Same bytes, same columns as BM_AllReduce.
void BM_ExactAllReduce(benchmark::State& state, AllReduceAlgorithm algorithm) {
  const std::int64_t bytes = state.range(0) * kMiB;
  const std::int32_t n = static_cast<std::int32_t>(state.range(1));
  const std::int64_t count = bytes / static_cast<std::int64_t>(sizeof(std::int64_t));
  std::vector<std::vector<std::int64_t>> storage(static_cast<std::size_t>(n));
  std::vector<std::span<std::int64_t>> buffers;
  for (auto& words : storage) {
    words.assign(static_cast<std::size_t>(count), 0);
    buffers.emplace_back(words);
  }
  CollectiveOptions options;
  options.algorithm = algorithm;
  options.replicas_per_worker = n / 2;
  const int calls_before_refill = static_cast<int>(56 / std::log2(static_cast<double>(n)));  // 8 * N^calls < 2^59
  int calls_left = 0;
  for (auto _ : state) {
    if (calls_left-- == 0) {
      state.PauseTiming();
      for (std::int32_t r = 0; r < n; ++r)
        for (std::int64_t i = 0; i < count; ++i)
          buffers[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] = 1 + (i + r) % 8;
      calls_left = calls_before_refill - 1;
      state.ResumeTiming();
    }
    AllReduce<std::int64_t>(buffers, ReduceOp::kSum, options);
    benchmark::ClobberMemory();
  }
  SetBusBandwidth(state, bytes, n);
}

// An exact gradient all-reduce end to end: a float gradient of `MiB` per replica
// travels as kExactWords words per element (19 x 8 bytes per 4-byte float), then
// every replica rounds its words back to floats. algbw and busbw count the float
// gradient's bytes, so they compare with BM_AllReduce on the same gradient.
void BM_ExactGradientAllReduce(benchmark::State& state) {
  const std::int64_t bytes = state.range(0) * kMiB;
  const std::int32_t n = static_cast<std::int32_t>(state.range(1));
  const std::int64_t count = bytes / static_cast<std::int64_t>(sizeof(float));
  std::vector<std::vector<std::int64_t>> storage(static_cast<std::size_t>(n));
  std::vector<std::vector<float>> gradients(static_cast<std::size_t>(n),
                                            std::vector<float>(static_cast<std::size_t>(count)));
  std::vector<std::span<std::int64_t>> buffers;
  for (auto& words : storage) {
    words.assign(static_cast<std::size_t>(count * kExactWords), 0);
    buffers.emplace_back(words);
  }
  CollectiveOptions options;
  for (auto _ : state) {
    state.PauseTiming();
    for (std::int32_t r = 0; r < n; ++r) {
      auto& words = storage[static_cast<std::size_t>(r)];
      std::fill(words.begin(), words.end(), 0);
      for (std::int64_t i = 0; i < count; i += 7)
        ExactAddFloat(words.data() + i * kExactWords, std::ldexp(static_cast<float>(1 + (i + r) % 8), -20));
    }
    state.ResumeTiming();
    AllReduce<std::int64_t>(buffers, ReduceOp::kSum, options);
    tbb::parallel_for(0, n, [&](std::int32_t r) {
      ExactToFloats(storage[static_cast<std::size_t>(r)], gradients[static_cast<std::size_t>(r)]);
    });
    benchmark::ClobberMemory();
  }
  SetBusBandwidth(state, bytes, n);
}

// memcpy of a 64 MiB buffer, cut in `threads` equal parts copied in parallel.
// copied_GBps counts the bytes copied; stream_GBps counts bytes read plus bytes
// written (twice as many), the convention of STREAM's Copy and of the cap.
void BM_Copy(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const std::int64_t bytes = 64 * kMiB;
  const std::int64_t count = bytes / static_cast<std::int64_t>(sizeof(float));
  AlignedBuffer source = MakeBuffer(count, 1.0f), destination = MakeBuffer(count, 0.0f);
  tbb::global_control control(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
  tbb::task_arena arena(threads);
  for (auto _ : state) {
    arena.execute([&] {
      tbb::parallel_for(
          tbb::blocked_range<int>(0, threads),
          [&](const tbb::blocked_range<int>& parts) {
            for (int part = parts.begin(); part != parts.end(); ++part) {
              const std::int64_t begin = count * part / threads, end = count * (part + 1) / threads;
              std::memcpy(destination.get() + begin, source.get() + begin,
                          static_cast<std::size_t>(end - begin) * sizeof(float));
            }
          },
          tbb::static_partitioner());
    });
    benchmark::ClobberMemory();
  }
  const double gigabytes = static_cast<double>(bytes) / 1e9;
  state.counters["copied_GBps"] = benchmark::Counter(gigabytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["stream_GBps"] = benchmark::Counter(2 * gigabytes, benchmark::Counter::kIsIterationInvariantRate);
}

// Reads and writes back every element of a 128 MiB buffer (x += 1; as much
// memory as the copy touches), cut in `threads` parts: the traffic pattern of an
// in-place all-reduce, whose stores pay no write-allocate read (the line was just
// read). stream_GBps counts bytes read plus bytes written.
void BM_UpdateInPlace(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const std::int64_t bytes = 128 * kMiB;
  const std::int64_t count = bytes / static_cast<std::int64_t>(sizeof(float));
  AlignedBuffer buffer = MakeBuffer(count, 0.0f);
  tbb::global_control control(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
  tbb::task_arena arena(threads);
  for (auto _ : state) {
    arena.execute([&] {
      tbb::parallel_for(
          tbb::blocked_range<int>(0, threads),
          [&](const tbb::blocked_range<int>& parts) {
            for (int part = parts.begin(); part != parts.end(); ++part) {
              float* data = buffer.get();
              const std::int64_t begin = count * part / threads, end = count * (part + 1) / threads;
              for (std::int64_t i = begin; i < end; ++i) data[i] += 1.0f;
            }
          },
          tbb::static_partitioner());
    });
    benchmark::ClobberMemory();
  }
  state.counters["stream_GBps"] =
      benchmark::Counter(2 * static_cast<double>(bytes) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void RegisterAll() {
  benchmark::RegisterBenchmark("BM_Copy", BM_Copy)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();
  benchmark::RegisterBenchmark("BM_UpdateInPlace", BM_UpdateInPlace)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();
  for (AllReduceAlgorithm algorithm : kAllReduceAlgorithms) {
    const std::string name = "BM_AllReduce/" + std::string(AllReduceAlgorithmName(algorithm));
    benchmark::RegisterBenchmark(name.c_str(), BM_AllReduce, algorithm)
        ->ArgsProduct({{1, 16, 64}, {2, 4, 8}})
        ->ArgNames({"MiB", "replicas"})
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    const std::string exact = "BM_ExactAllReduce/" + std::string(AllReduceAlgorithmName(algorithm));
    benchmark::RegisterBenchmark(exact.c_str(), BM_ExactAllReduce, algorithm)
        ->ArgsProduct({{16, 64}, {2, 4, 8}})
        ->ArgNames({"MiB", "replicas"})
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("BM_ExactGradientAllReduce/ring", BM_ExactGradientAllReduce)
      ->ArgsProduct({{16}, {2, 4}})
      ->ArgNames({"MiB", "replicas"})
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace dtlab

int main(int argc, char** argv) {
  dtlab::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
