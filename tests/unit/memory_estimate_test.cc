// The memory estimate of a run (sim/training/memory_estimate.h) and the refusal of runs that
// cannot fit, with the estimate, what is available and how to fix it (issue 19).
#include <gtest/gtest.h>

#include <cmath>

#include "core/exact_words.h"
#include "sim/training/memory_estimate.h"

namespace dtlab {
namespace {

RunMemoryInput Input(std::int32_t replicas) {
  RunMemoryInput input;
  input.parameter_values = 1000;
  input.optimizer_slots = 2;  // adam: m, v
  input.replicas = replicas;
  input.global_batch = 64;
  input.example_values = 784;
  input.activation_values_per_example = 100;
  input.chunk_size = 16;
  input.threads = 2;
  return input;
}

TEST(MemoryEstimate, CountsWhatEachReplicaAllocates) {
  const MemoryEstimate e = EstimateRunMemory(Input(4));
  // weights, gradients, the packed buffer, 2 slots: 5 x 4 bytes per value.
  EXPECT_DOUBLE_EQ(e.per_replica_bytes, 1000.0 * 4 * 5);
  EXPECT_DOUBLE_EQ(e.replicas_bytes, 4 * 1000.0 * 4 * 5);
  EXPECT_DOUBLE_EQ(e.batch_bytes, 64 * (784 * 4.0 + 32) + 2.0 * 100 * 4 * 16 * 2);
  EXPECT_DOUBLE_EQ(e.message_log_bytes, 2.0 * 4 * 3 * sizeof(Message));  // ring: 2n(n-1) messages
  EXPECT_DOUBLE_EQ(e.total_bytes, e.replicas_bytes + e.batch_bytes + e.message_log_bytes);
}

TEST(MemoryEstimate, ExactModeAddsAccumulatorWords) {
  RunMemoryInput input = Input(2);
  const double fast = EstimateRunMemory(input).per_replica_bytes;
  input.exact = true;
  EXPECT_DOUBLE_EQ(EstimateRunMemory(input).per_replica_bytes - fast, 1000.0 * kExactWords * 8);
}

TEST(MemoryEstimate, TheMessageLogFollowsTheAlgorithm) {
  RunMemoryInput input = Input(1024);
  input.all_reduce = AllReduceAlgorithm::kNaive;
  EXPECT_DOUBLE_EQ(EstimateRunMemory(input).message_log_bytes, 2.0 * 1023 * sizeof(Message));
  input.all_reduce = AllReduceAlgorithm::kHalvingDoubling;
  EXPECT_DOUBLE_EQ(EstimateRunMemory(input).message_log_bytes, 2.0 * 1024 * 10 * sizeof(Message));
}

TEST(MemoryEstimate, HundredThousandReplicasDoNotOverflow) {
  const MemoryEstimate e = EstimateRunMemory(Input(100000));
  EXPECT_GT(e.message_log_bytes, 4e11);  // the ring's message log alone: 2e10 messages of 24 bytes
  EXPECT_TRUE(std::isfinite(e.total_bytes));
}

TEST(MemoryEstimate, RefusesARunThatDoesNotFit) {
  const RunMemoryInput input = Input(100000);
  const Status refused = CheckRunFitsInMemory(EstimateRunMemory(input), input,
                                              AvailableMemory{8.0 * (1 << 30), "MemAvailable in /proc/meminfo"});
  EXPECT_EQ(refused.code(), Status::Code::kInvalidArgument);  // exit 2, before any allocation
  for (const char* part : {"the run needs about", "100000 replicas x", "but only 8.0 GiB is available",
                           "MemAvailable in /proc/meminfo", "use fewer --replicas, a smaller batch"})
    EXPECT_NE(refused.message().find(part), std::string::npos) << part << " in " << refused.message();
  EXPECT_TRUE(CheckRunFitsInMemory(EstimateRunMemory(Input(4)), Input(4), AvailableMemory{8.0 * (1 << 30), "x"}).ok());
  EXPECT_TRUE(CheckRunFitsInMemory(EstimateRunMemory(input), input, std::nullopt).ok());  // nothing known: no refusal
}

TEST(MemoryEstimate, AvailableMemoryIsReadFromThisMachine) {
  const auto available = AvailableMemoryForRun();
  ASSERT_TRUE(available.has_value());
  EXPECT_GT(available->bytes, 0);
  EXPECT_FALSE(available->source.empty());
}

TEST(MemoryEstimate, BytesText) {
  EXPECT_EQ(BytesText(80), "80 B");
  EXPECT_EQ(BytesText(1536), "1.5 KiB");
  EXPECT_EQ(BytesText(8.0 * (1 << 30)), "8.0 GiB");
}

}  // namespace
}  // namespace dtlab
