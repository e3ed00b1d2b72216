// Collectives, checked the nccl-tests way (verifiable/verifiable.h): inputs are
// small integers (times 1/4 for floating types), so every partial sum is exact in
// any order and each replica's expected output is known alone; each replica's
// output is compared element by element and the mismatches counted (#wrong must
// be 0). Also: bit-identical float results for 1, 2 and 8 threads, the message log
// of each schedule, and a RapidCheck property against a sequential sum.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>
#include <vector>

#include "core/rng.h"
#include "sim/comm/all_reduce_algorithm.h"
#include "sim/comm/collectives.h"

namespace dtlab {
namespace {

// ---------------------------------------------------------------- inputs

// A small integer in [-8, 8] for element `index` of replica `replica`.
std::int64_t SmallValue(std::int64_t replica, std::int64_t index) {
  return (replica * 7 + index * 13 + (replica * index) % 5) % 17 - 8;
}

// The input value: for floating types a quarter of SmallValue, so every partial
// sum of up to 1024 replicas is a multiple of 1/4 below 2^13 (exact in float); for
// int64 SmallValue times 2^40 plus the replica id, which uses the high words (sums
// of 1024 replicas stay below 2^54).
template <typename T>
T InputValue(std::int64_t replica, std::int64_t index) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(SmallValue(replica, index)) * static_cast<T>(0.25);
  } else {
    return SmallValue(replica, index) * (std::int64_t{1} << 40) + replica;
  }
}

// The exact sum (or mean) over `num_replicas` replicas of InputValue at `index`,
// offset by `first_index` (for the blocks of ReduceScatter).
template <typename T>
T ExpectedReduction(std::int32_t num_replicas, std::int64_t index, ReduceOp op) {
  T sum = 0;
  for (std::int32_t r = 0; r < num_replicas; ++r) sum += InputValue<T>(r, index);  // exact: see InputValue
  if (op == ReduceOp::kMean) return sum / static_cast<T>(num_replicas);
  return sum;
}

template <typename T>
std::vector<std::vector<T>> MakeInputs(std::int32_t num_replicas, std::int64_t count) {
  std::vector<std::vector<T>> inputs(static_cast<std::size_t>(num_replicas), std::vector<T>(count));
  for (std::int32_t r = 0; r < num_replicas; ++r)
    for (std::int64_t i = 0; i < count; ++i) inputs[r][i] = InputValue<T>(r, i);
  return inputs;
}

template <typename T>
std::vector<std::span<T>> Spans(std::vector<std::vector<T>>& buffers) {
  return {buffers.begin(), buffers.end()};
}
template <typename T>
std::vector<std::span<const T>> ConstSpans(const std::vector<std::vector<T>>& buffers) {
  return {buffers.begin(), buffers.end()};
}

// A value no collective produces from our inputs: shows an output never written.
template <typename T>
constexpr T kSentinel = static_cast<T>(12345.5);
template <>
constexpr std::int64_t kSentinel<std::int64_t> = 0x5a5a5a5a5a5a5a5;

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool SameBits(std::int64_t a, std::int64_t b) { return a == b; }

// #wrong of one replica, and where the first mismatch is (for the failure message).
template <typename T>
struct WrongCount {
  std::int64_t wrong = 0;
  std::int64_t first_index = -1;
  T got{}, expected{};
  void Check(std::int64_t index, T value, T expected_value) {
    if (SameBits(value, expected_value)) return;
    if (wrong++ == 0) {
      first_index = index;
      got = value;
      expected = expected_value;
    }
  }
};

std::string TypeName(float) { return "float"; }
std::string TypeName(double) { return "double"; }
std::string TypeName(std::int64_t) { return "int64"; }

// ---------------------------------------------------------------- all-reduce

struct AllReduceCase {
  AllReduceAlgorithm algorithm;
  std::int32_t replicas_per_worker;
  std::int32_t num_replicas;
  std::int64_t count;
  bool in_place;
  ReduceOp op;
};

template <typename T>
std::string Describe(const AllReduceCase& c) {
  std::ostringstream out;
  out << TypeName(T{}) << " " << AllReduceAlgorithmName(c.algorithm);
  if (c.algorithm == AllReduceAlgorithm::kHierarchical) out << " (R=" << c.replicas_per_worker << ")";
  out << " N=" << c.num_replicas << " size=" << c.count << (c.in_place ? " in place" : " out of place")
      << (c.op == ReduceOp::kMean ? " MEAN" : " SUM");
  return out.str();
}

// Runs one all-reduce and returns the total #wrong over all replicas (and the
// inputs, for out of place); reports each replica that has any wrong.
template <typename T>
std::int64_t RunAndCountWrong(const AllReduceCase& c) {
  const std::vector<std::vector<T>> inputs = MakeInputs<T>(c.num_replicas, c.count);
  std::vector<std::vector<T>> outputs;
  CollectiveOptions options;
  options.algorithm = c.algorithm;
  options.replicas_per_worker = c.replicas_per_worker;
  if (c.in_place) {
    outputs = inputs;
    AllReduce<T>(Spans(outputs), c.op, options);
  } else {
    outputs.assign(inputs.size(), std::vector<T>(c.count, kSentinel<T>));
    AllReduce<T>(ConstSpans(inputs), Spans(outputs), c.op, options);
  }
  std::vector<T> expected(c.count);
  for (std::int64_t i = 0; i < c.count; ++i) expected[i] = ExpectedReduction<T>(c.num_replicas, i, c.op);
  std::int64_t total_wrong = 0;
  for (std::int32_t r = 0; r < c.num_replicas; ++r) {
    WrongCount<T> count;
    for (std::int64_t i = 0; i < c.count; ++i) count.Check(i, outputs[r][i], expected[i]);
    if (!c.in_place)  // inputs are left alone
      for (std::int64_t i = 0; i < c.count; ++i) count.Check(i, inputs[r][i], InputValue<T>(r, i));
    if (count.wrong > 0)
      ADD_FAILURE() << Describe<T>(c) << ": replica " << r << " #wrong " << count.wrong << ", first at "
                    << count.first_index << ": got " << count.got << ", expected " << count.expected;
    total_wrong += count.wrong;
  }
  return total_wrong;
}

std::vector<std::int32_t> ReplicaCounts() {
  std::vector<std::int32_t> counts(17);
  std::iota(counts.begin(), counts.end(), 1);
  counts.push_back(64);
  counts.push_back(1024);
  return counts;
}

std::vector<std::int64_t> Sizes(std::int32_t n) {
  std::vector<std::int64_t> sizes = {0, 1, 7, n - 1, n, n + 1};
  if (n < 1024) {  // 1024 replicas: small sizes only, the test stays fast
    sizes.push_back(1000);
    sizes.push_back(4099);
  }
  return sizes;
}

// The worker sizes tried for hierarchical: every divisor of N up to 17 replicas, a
// few for larger N (0 means one worker of N).
std::vector<std::int32_t> WorkerSizes(AllReduceAlgorithm algorithm, std::int32_t n) {
  if (algorithm != AllReduceAlgorithm::kHierarchical) return {0};
  if (n == 64) return {0, 1, 8, 32};
  if (n == 1024) return {0, 32};
  std::vector<std::int32_t> sizes = {0};
  for (std::int32_t d = 1; d < n; ++d)
    if (n % d == 0) sizes.push_back(d);
  return sizes;
}

template <typename T>
class CollectivesTest : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, double, std::int64_t>;
TYPED_TEST_SUITE(CollectivesTest, ElementTypes);

TYPED_TEST(CollectivesTest, AllReduceIsExactForEveryAlgorithmReplicaCountAndSize) {
  using T = TypeParam;
  std::vector<ReduceOp> ops = {ReduceOp::kSum};
  if (std::is_floating_point_v<T>) ops.push_back(ReduceOp::kMean);
  std::int64_t cases = 0, wrong = 0;
  for (AllReduceAlgorithm algorithm : kAllReduceAlgorithms)
    for (std::int32_t n : ReplicaCounts())
      for (std::int32_t per_worker : WorkerSizes(algorithm, n))
        for (std::int64_t count : Sizes(n))
          for (bool in_place : {true, false})
            for (ReduceOp op : ops) {
              if (op == ReduceOp::kMean && n > 17) continue;  // MEAN's division is the same code for every N
              wrong += RunAndCountWrong<T>({algorithm, per_worker, n, count, in_place, op});
              ++cases;
            }
  EXPECT_EQ(wrong, 0) << "over " << cases << " cases";
  this->RecordProperty("cases", static_cast<int>(cases));
}

// ---------------------------------------------------------------- the other collectives

std::vector<std::int32_t> Roots(std::int32_t n) {
  std::vector<std::int32_t> roots = {0, n / 2, n - 1};
  std::sort(roots.begin(), roots.end());
  roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
  return roots;
}

TYPED_TEST(CollectivesTest, ReduceIsExactAtEveryRoot) {
  using T = TypeParam;
  std::int64_t wrong = 0;
  for (std::int32_t n = 1; n <= 17; ++n)
    for (std::int32_t root : Roots(n))
      for (std::int64_t count : Sizes(n))
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
          if (op == ReduceOp::kMean && !std::is_floating_point_v<T>) continue;
          std::vector<std::vector<T>> buffers = MakeInputs<T>(n, count);
          Reduce<T>(Spans(buffers), root, op, {});
          WrongCount<T> c;
          for (std::int64_t i = 0; i < count; ++i) c.Check(i, buffers[root][i], ExpectedReduction<T>(n, i, op));
          EXPECT_EQ(c.wrong, 0) << TypeName(T{}) << " N=" << n << " root=" << root << " size=" << count << ", first at "
                                << c.first_index << ": got " << c.got << ", expected " << c.expected;
          wrong += c.wrong;
        }
  EXPECT_EQ(wrong, 0);
}

TYPED_TEST(CollectivesTest, BroadcastCopiesTheRootToEveryReplica) {
  using T = TypeParam;
  for (std::int32_t n = 1; n <= 17; ++n)
    for (std::int32_t root : Roots(n))
      for (std::int64_t count : Sizes(n)) {
        std::vector<std::vector<T>> buffers = MakeInputs<T>(n, count);
        Broadcast<T>(Spans(buffers), root, {});
        for (std::int32_t r = 0; r < n; ++r) {
          WrongCount<T> c;
          for (std::int64_t i = 0; i < count; ++i) c.Check(i, buffers[r][i], InputValue<T>(root, i));
          EXPECT_EQ(c.wrong, 0) << TypeName(T{}) << " N=" << n << " root=" << root << " size=" << count << " replica "
                                << r << ", first at " << c.first_index;
        }
      }
}

TYPED_TEST(CollectivesTest, AllGatherConcatenatesInReplicaOrder) {
  using T = TypeParam;
  for (std::int32_t n = 1; n <= 17; ++n)
    for (std::int64_t count : Sizes(n)) {
      const std::vector<std::vector<T>> inputs = MakeInputs<T>(n, count);
      std::vector<std::vector<T>> outputs(n, std::vector<T>(n * count, kSentinel<T>));
      AllGather<T>(ConstSpans(inputs), Spans(outputs), {});
      for (std::int32_t r = 0; r < n; ++r) {
        WrongCount<T> c;
        for (std::int32_t from = 0; from < n; ++from)
          for (std::int64_t i = 0; i < count; ++i)
            c.Check(from * count + i, outputs[r][from * count + i], InputValue<T>(from, i));
        EXPECT_EQ(c.wrong, 0) << TypeName(T{}) << " N=" << n << " size=" << count << " replica " << r << ", first at "
                              << c.first_index;
      }
    }
}

TYPED_TEST(CollectivesTest, ReduceScatterGivesReplicaIItsReducedBlock) {
  using T = TypeParam;
  for (std::int32_t n = 1; n <= 17; ++n)
    for (std::int64_t count : Sizes(n))
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
        if (op == ReduceOp::kMean && !std::is_floating_point_v<T>) continue;
        const std::vector<std::vector<T>> inputs = MakeInputs<T>(n, n * count);
        std::vector<std::vector<T>> outputs(n, std::vector<T>(count, kSentinel<T>));
        ReduceScatter<T>(ConstSpans(inputs), Spans(outputs), op, {});
        for (std::int32_t r = 0; r < n; ++r) {
          WrongCount<T> c;
          for (std::int64_t i = 0; i < count; ++i)
            c.Check(i, outputs[r][i], ExpectedReduction<T>(n, r * count + i, op));
          EXPECT_EQ(c.wrong, 0) << TypeName(T{}) << " N=" << n << " size=" << count << " replica " << r << ", first at "
                                << c.first_index << ": got " << c.got << ", expected " << c.expected;
        }
      }
}

// ---------------------------------------------------------------- determinism

// Random floats of mixed magnitudes: sums round, so the order of addition shows.
std::vector<std::vector<float>> RandomFloats(std::int32_t n, std::int64_t count, std::uint64_t seed) {
  std::vector<std::vector<float>> buffers(n, std::vector<float>(count));
  for (std::int32_t r = 0; r < n; ++r) {
    CounterRng rng(seed, RngPurpose::kTest, static_cast<std::uint64_t>(r));
    for (auto& x : buffers[r]) x = std::ldexp(rng.UniformFloat() - 0.5f, static_cast<int>(rng.UniformInt(21)) - 10);
  }
  return buffers;
}

// Runs `body` on an arena of exactly `threads` threads (more than the cores is fine).
template <typename Body>
void WithThreads(int threads, Body body) {
  tbb::global_control control(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
  tbb::task_arena arena(threads);
  arena.execute(body);
}

TEST(Collectives, ArenaOfEightThreadsReallyHasEight) {
  WithThreads(8, [] { EXPECT_EQ(tbb::this_task_arena::max_concurrency(), 8); });
}

TEST(Collectives, FloatResultsAreBitIdenticalForOneTwoAndEightThreads) {
  // Large enough that a chunk spans several 64 KiB blocks (tasks).
  const std::int64_t count = (1 << 19) + 12345;
  for (AllReduceAlgorithm algorithm : kAllReduceAlgorithms)
    for (std::int32_t n : {2, 3, 8, 13}) {
      const auto inputs = RandomFloats(n, count, 7);
      CollectiveOptions options;
      options.algorithm = algorithm;
      options.replicas_per_worker = n % 2 == 0 ? 2 : 1;
      std::vector<std::vector<float>> reference;
      for (int threads : {1, 2, 8}) {
        std::vector<std::vector<float>> buffers = inputs;
        WithThreads(threads, [&] { AllReduce<float>(Spans(buffers), ReduceOp::kMean, options); });
        if (threads == 1) {
          reference = buffers;
          // Every replica holds the same bits, whatever the algorithm.
          for (std::int32_t r = 1; r < n; ++r)
            EXPECT_EQ(std::memcmp(buffers[r].data(), buffers[0].data(), count * sizeof(float)), 0)
                << AllReduceAlgorithmName(algorithm) << " N=" << n << " replica " << r;
          continue;
        }
        for (std::int32_t r = 0; r < n; ++r)
          EXPECT_EQ(std::memcmp(buffers[r].data(), reference[r].data(), count * sizeof(float)), 0)
              << AllReduceAlgorithmName(algorithm) << " N=" << n << " threads=" << threads << " replica " << r;
      }
    }
}

TEST(Collectives, ReduceAndReduceScatterAreBitIdenticalForOneTwoAndEightThreads) {
  const std::int32_t n = 5;
  const std::int64_t count = (1 << 18) + 3;
  const auto inputs = RandomFloats(n, n * count, 9);
  std::vector<float> reduce_reference, scatter_reference;
  for (int threads : {1, 2, 8}) {
    std::vector<std::vector<float>> buffers = inputs;
    std::vector<std::vector<float>> outputs(n, std::vector<float>(count));
    WithThreads(threads, [&] {
      ReduceScatter<float>(ConstSpans(inputs), Spans(outputs), ReduceOp::kSum, {});
      Reduce<float>(Spans(buffers), 2, ReduceOp::kSum, {});
    });
    std::vector<float> scattered;
    for (const auto& out : outputs) scattered.insert(scattered.end(), out.begin(), out.end());
    if (threads == 1) {
      reduce_reference = buffers[2];
      scatter_reference = scattered;
    }
    EXPECT_EQ(std::memcmp(buffers[2].data(), reduce_reference.data(), n * count * sizeof(float)), 0) << threads;
    EXPECT_EQ(std::memcmp(scattered.data(), scatter_reference.data(), n * count * sizeof(float)), 0) << threads;
    // Both sum in replica order, so they agree with each other too.
    EXPECT_EQ(std::memcmp(scattered.data(), buffers[2].data(), n * count * sizeof(float)), 0) << threads;
  }
}

// ---------------------------------------------------------------- message log

// What a record says per replica.
struct Traffic {
  std::vector<std::int64_t> messages_sent, bytes_sent, messages_received;
};
Traffic TrafficOf(const CollectiveRecord& record) {
  Traffic t;
  t.messages_sent.assign(record.num_replicas, 0);
  t.bytes_sent.assign(record.num_replicas, 0);
  t.messages_received.assign(record.num_replicas, 0);
  for (const Message& m : record.messages) {
    ++t.messages_sent[m.sender];
    t.bytes_sent[m.sender] += m.bytes;
    ++t.messages_received[m.receiver];
  }
  return t;
}

template <typename T>
CollectiveRecord LogAllReduce(AllReduceAlgorithm algorithm, std::int32_t n, std::int64_t count,
                              std::int32_t replicas_per_worker = 0) {
  std::vector<std::vector<T>> buffers = MakeInputs<T>(n, count);
  MessageLog log;
  CollectiveOptions options;
  options.algorithm = algorithm;
  options.replicas_per_worker = replicas_per_worker;
  options.step = 42;
  options.log = &log;
  AllReduce<T>(Spans(buffers), ReduceOp::kSum, options);
  EXPECT_EQ(log.collectives().size(), 1u);
  return log.collectives().at(0);
}

TEST(CollectivesLog, RingSendsTwoNMinusOneMessagesPerReplicaAroundTheRing) {
  for (std::int32_t n : {2, 3, 5, 8, 13}) {
    for (std::int64_t count : {std::int64_t{n}, std::int64_t{1000}, std::int64_t{4099}}) {
      const CollectiveRecord record = LogAllReduce<double>(AllReduceAlgorithm::kRing, n, count);
      EXPECT_EQ(record.name, "all_reduce/ring");
      EXPECT_EQ(record.step, 42);
      EXPECT_EQ(record.num_replicas, n);
      EXPECT_EQ(record.bytes_per_replica, count * 8);
      EXPECT_EQ(record.num_phases, 2 * (n - 1));
      const Traffic t = TrafficOf(record);
      const double ideal = 2.0 * (n - 1) / n * count * 8;
      for (std::int32_t r = 0; r < n; ++r) {
        EXPECT_EQ(t.messages_sent[r], 2 * (n - 1)) << "N=" << n << " replica " << r;
        EXPECT_EQ(t.messages_received[r], 2 * (n - 1));
        // Chunks differ from count/N by less than one element.
        EXPECT_LE(std::abs(t.bytes_sent[r] - ideal), 2.0 * (n - 1) * 8) << "N=" << n << " replica " << r;
      }
      for (const Message& m : record.messages) EXPECT_EQ(m.receiver, (m.sender + 1) % n);
      // Every phase moves the whole buffer once, in N chunks.
      std::int64_t total = 0;
      for (const Message& m : record.messages) total += m.bytes;
      EXPECT_EQ(total, 2 * (n - 1) * count * 8);
    }
  }
}

TEST(CollectivesLog, NaiveSendsEverythingToReplicaZeroAndBack) {
  const std::int32_t n = 6;
  const CollectiveRecord record = LogAllReduce<float>(AllReduceAlgorithm::kNaive, n, 1000);
  EXPECT_EQ(record.name, "all_reduce/naive");
  EXPECT_EQ(record.num_phases, 2);
  ASSERT_EQ(record.messages.size(), 2u * (n - 1));
  for (std::int32_t r = 1; r < n; ++r) {
    const Message& in = record.messages[r - 1];
    EXPECT_EQ(in.phase, 0);
    EXPECT_EQ(in.sender, r);
    EXPECT_EQ(in.receiver, 0);
    EXPECT_EQ(in.bytes, 4000);
    const Message& out = record.messages[n - 1 + r - 1];
    EXPECT_EQ(out.phase, 1);
    EXPECT_EQ(out.sender, 0);
    EXPECT_EQ(out.receiver, r);
    EXPECT_EQ(out.bytes, 4000);
  }
}

TEST(CollectivesLog, HierarchicalCrossesWorkersOnlyBetweenLeaders) {
  for (auto [workers, per_worker] : {std::pair{2, 4}, std::pair{3, 2}, std::pair{4, 3}, std::pair{5, 1}}) {
    const std::int32_t n = workers * per_worker;
    const CollectiveRecord record = LogAllReduce<float>(AllReduceAlgorithm::kHierarchical, n, 1000, per_worker);
    EXPECT_EQ(record.name, "all_reduce/hierarchical");
    EXPECT_EQ(record.num_phases, 2 * (workers - 1) + (per_worker > 1 ? 2 : 0));
    std::int64_t across = 0;
    for (const Message& m : record.messages) {
      const std::int32_t sender_worker = m.sender / per_worker, receiver_worker = m.receiver / per_worker;
      if (sender_worker != receiver_worker) {
        ++across;
        EXPECT_EQ(m.sender % per_worker, 0) << "W=" << workers << " R=" << per_worker;
        EXPECT_EQ(m.receiver % per_worker, 0) << "W=" << workers << " R=" << per_worker;
      } else {
        // Within a worker, members talk only to their leader.
        EXPECT_TRUE(m.sender % per_worker == 0 || m.receiver % per_worker == 0);
      }
    }
    EXPECT_EQ(across, 2 * workers * (workers - 1));  // the leaders' ring
  }
}

TEST(CollectivesLog, DirectGathersChunkIThenSendsItToEveryone) {
  const std::int32_t n = 4;
  const std::int64_t count = 1001;  // chunks 251, 250, 250, 250
  const CollectiveRecord record = LogAllReduce<float>(AllReduceAlgorithm::kDirect, n, count);
  EXPECT_EQ(record.num_phases, 2);
  ASSERT_EQ(record.messages.size(), 2u * n * (n - 1));
  for (const Message& m : record.messages) {
    const std::int32_t chunk_owner = m.phase == 0 ? m.receiver : m.sender;
    EXPECT_EQ(m.bytes, (chunk_owner == 0 ? 251 : 250) * 4);
  }
  const Traffic t = TrafficOf(record);
  for (std::int32_t r = 0; r < n; ++r) EXPECT_EQ(t.messages_sent[r], 2 * (n - 1));
}

TEST(CollectivesLog, TreeUsesTwoLogNPhasesPlusTwoToFoldTheExtraReplicas) {
  for (std::int32_t n : {2, 4, 8, 16}) {
    const CollectiveRecord record = LogAllReduce<float>(AllReduceAlgorithm::kHalvingDoubling, n, 1024);
    EXPECT_EQ(record.num_phases, 2 * std::countr_zero(static_cast<unsigned>(n))) << n;
    const Traffic t = TrafficOf(record);
    for (std::int32_t r = 0; r < n; ++r) {
      EXPECT_EQ(t.bytes_sent[r], 2 * (1024 - 1024 / n) * 4) << "N=" << n;
      EXPECT_EQ(t.messages_sent[r], 2 * std::countr_zero(static_cast<unsigned>(n)));
    }
  }
  for (std::int32_t n : {3, 5, 6, 7, 12}) {
    const CollectiveRecord record = LogAllReduce<float>(AllReduceAlgorithm::kHalvingDoubling, n, 1024);
    const int log_p = std::bit_width(static_cast<unsigned>(n)) - 1;
    EXPECT_EQ(record.num_phases, 2 * log_p + 2) << n;
    // The folded replicas (even ones below 2E) send once, in phase 0, and receive once at the end.
    const std::int32_t extra = n - (1 << log_p);
    for (const Message& m : record.messages) {
      if (m.phase == 0) {
        EXPECT_LT(m.sender, 2 * extra);
        EXPECT_EQ(m.sender % 2, 0);
        EXPECT_EQ(m.receiver, m.sender + 1);
      }
      if (m.sender < 2 * extra && m.sender % 2 == 0) {
        EXPECT_EQ(m.phase, 0);
      }
    }
  }
}

TEST(CollectivesLog, OneReplicaOrAnEmptyBufferSendsNothing) {
  for (AllReduceAlgorithm algorithm : kAllReduceAlgorithms) {
    EXPECT_TRUE(LogAllReduce<float>(algorithm, 1, 100).messages.empty());
    const CollectiveRecord empty = LogAllReduce<float>(algorithm, 5, 0);
    EXPECT_TRUE(empty.messages.empty());
    EXPECT_EQ(empty.num_phases, 0);
    EXPECT_EQ(empty.num_replicas, 5);
  }
}

TEST(CollectivesLog, OtherCollectivesAreNamedAndSizedAsDocumented) {
  const std::int32_t n = 4;
  MessageLog log;
  CollectiveOptions options;
  options.log = &log;
  std::vector<std::vector<float>> buffers = MakeInputs<float>(n, 100);
  Reduce<float>(Spans(buffers), 3, ReduceOp::kSum, options);
  Broadcast<float>(Spans(buffers), 1, options);
  std::vector<std::vector<float>> gathered(n, std::vector<float>(n * 100));
  AllGather<float>(ConstSpans(buffers), Spans(gathered), options);
  ReduceScatter<float>(ConstSpans(gathered), Spans(buffers), ReduceOp::kSum, options);
  ASSERT_EQ(log.collectives().size(), 4u);
  const auto& records = log.collectives();
  EXPECT_EQ(records[0].name, "reduce");
  EXPECT_EQ(records[1].name, "broadcast");
  EXPECT_EQ(records[2].name, "all_gather");
  EXPECT_EQ(records[3].name, "reduce_scatter");
  EXPECT_EQ(records[0].bytes_per_replica, 400);
  EXPECT_EQ(records[2].bytes_per_replica, 1600);
  EXPECT_EQ(records[3].bytes_per_replica, 1600);
  // Reduce: chunk i (25 floats) from every peer to i, then from i to the root.
  EXPECT_EQ(records[0].num_phases, 2);
  EXPECT_EQ(records[0].messages.size(), static_cast<std::size_t>(n * (n - 1) + (n - 1)));
  for (const Message& m : records[0].messages) {
    EXPECT_EQ(m.bytes, 100);
    if (m.phase == 1) {
      EXPECT_EQ(m.receiver, 3);
    }
  }
  // Broadcast: the root sends N-1 chunks, then every chunk reaches the N-1 non-roots.
  EXPECT_EQ(records[1].messages.size(), static_cast<std::size_t>((n - 1) + n * (n - 1) - (n - 1)));
  std::int64_t received_by_each = 0;
  for (const Message& m : records[1].messages) {
    EXPECT_NE(m.receiver, 1);
    if (m.receiver == 0) received_by_each += m.bytes;
  }
  EXPECT_EQ(received_by_each, 400);
  // All-gather and reduce-scatter: one phase, N(N-1) messages of 100 floats.
  for (const auto* record : {&records[2], &records[3]}) {
    EXPECT_EQ(record->num_phases, 1);
    EXPECT_EQ(record->messages.size(), static_cast<std::size_t>(n * (n - 1)));
    for (const Message& m : record->messages) EXPECT_EQ(m.bytes, 400);
  }
}

// ---------------------------------------------------------------- names

// RecordSchedule (dtlab train --dry-run) prices a collective from its schedule
// alone: its record is the one a real call leaves in the message log.
bool SameRecord(const CollectiveRecord& a, const CollectiveRecord& b) {
  if (a.name != b.name || a.num_replicas != b.num_replicas || a.num_phases != b.num_phases ||
      a.bytes_per_replica != b.bytes_per_replica || a.messages.size() != b.messages.size())
    return false;
  for (std::size_t i = 0; i < a.messages.size(); ++i)
    if (a.messages[i].phase != b.messages[i].phase || a.messages[i].sender != b.messages[i].sender ||
        a.messages[i].receiver != b.messages[i].receiver || a.messages[i].bytes != b.messages[i].bytes)
      return false;
  return true;
}

TEST(CollectivesLog, ARecordedScheduleIsWhatARealCallLogs) {
  for (const AllReduceAlgorithm algorithm : kAllReduceAlgorithms) {
    for (std::int32_t n : {2, 3, 6, 8}) {
      for (std::int64_t count : {std::int64_t{0}, std::int64_t{5}, std::int64_t{1001}}) {
        const std::int32_t per_worker = n % 2 == 0 ? 2 : 0;
        CollectiveRecord real = LogAllReduce<std::int64_t>(algorithm, n, count, per_worker);
        real.step = 0;
        const AllReduceSpec spec{count, false, per_worker};
        const CollectiveRecord recorded =
            RecordSchedule("all_reduce/" + std::string(AllReduceAlgorithmName(algorithm)), n, count, 8,
                           [&](ScheduleTransport& t) { algorithm.info().schedule(t, spec); });
        EXPECT_TRUE(SameRecord(real, recorded))
            << AllReduceAlgorithmName(algorithm) << " N=" << n << " count=" << count;
      }
    }
  }
  // Reduce and Broadcast, as central_storage prices them.
  const std::int32_t n = 5;
  const std::int64_t count = 1003;
  std::vector<std::vector<float>> buffers = MakeInputs<float>(n, count);
  MessageLog log;
  CollectiveOptions options;
  options.log = &log;
  Reduce<float>(Spans(buffers), 0, ReduceOp::kSum, options);
  Broadcast<float>(Spans(buffers), 0, options);
  ASSERT_EQ(log.collectives().size(), 2u);
  EXPECT_TRUE(SameRecord(log.collectives()[0], RecordSchedule("reduce", n, count, 4, [&](ScheduleTransport& t) {
                           ScheduleReduce(t, count, 0, false);
                         })));
  EXPECT_TRUE(SameRecord(log.collectives()[1], RecordSchedule("broadcast", n, count, 4, [&](ScheduleTransport& t) {
                           ScheduleBroadcast(t, count, 0);
                         })));
}

TEST(Collectives, AlgorithmNamesRoundTrip) {
  for (AllReduceAlgorithm algorithm : kAllReduceAlgorithms) {
    auto parsed = ParseAllReduceAlgorithm(AllReduceAlgorithmName(algorithm));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, algorithm);
  }
  const auto bad = ParseAllReduceAlgorithm("butterfly");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("ring, halving_doubling (alias tree), naive, hierarchical, direct"),
            std::string::npos);
}

// ---------------------------------------------------------------- property

RC_GTEST_PROP(CollectivesProperty, AllReduceOfIntegersEqualsTheSequentialSum, ()) {
  const auto n = *rc::gen::inRange<std::int32_t>(1, 41);
  const auto count = *rc::gen::inRange<std::int64_t>(0, 301);
  const auto algorithm =
      *rc::gen::elementOf(std::vector<AllReduceAlgorithm>(kAllReduceAlgorithms.begin(), kAllReduceAlgorithms.end()));
  std::vector<std::int32_t> divisors;
  for (std::int32_t d = 1; d <= n; ++d)
    if (n % d == 0) divisors.push_back(d);
  const auto per_worker = *rc::gen::elementOf(divisors);
  const bool in_place = *rc::gen::arbitrary<bool>();
  std::vector<std::vector<std::int64_t>> inputs(n);
  for (auto& input : inputs)
    input = *rc::gen::container<std::vector<std::int64_t>>(
        static_cast<std::size_t>(count),
        rc::gen::inRange<std::int64_t>(-(std::int64_t{1} << 50), std::int64_t{1} << 50));

  std::vector<std::int64_t> expected(count, 0);
  for (const auto& input : inputs)
    for (std::int64_t i = 0; i < count; ++i) expected[i] += input[i];

  CollectiveOptions options;
  options.algorithm = algorithm;
  options.replicas_per_worker = per_worker;
  std::vector<std::vector<std::int64_t>> outputs;
  if (in_place) {
    outputs = inputs;
    AllReduce<std::int64_t>(Spans(outputs), ReduceOp::kSum, options);
  } else {
    outputs.assign(n, std::vector<std::int64_t>(count, 0));
    AllReduce<std::int64_t>(ConstSpans(inputs), Spans(outputs), ReduceOp::kSum, options);
  }
  for (std::int32_t r = 0; r < n; ++r) RC_ASSERT(outputs[r] == expected);
}

}  // namespace
}  // namespace dtlab
