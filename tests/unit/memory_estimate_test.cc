// The memory estimate of a run (sim/training/memory_estimate.h) and the refusal of runs that
// cannot fit, with the estimate, what is available and how to fix it (issue 19).
#include <gtest/gtest.h>

#include <cmath>

#include "core/exact_words.h"
#include "sim/comm/compact_exact.h"
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

TEST(MemoryEstimate, CentralStorageReplicasHoldNoVariables) {
  // central_storage: the weights and slots are the host's one copy; a replica holds
  // its gradients and the packed buffer, and, folded, nothing.
  RunMemoryInput input = Input(4);
  input.central_storage = true;
  const MemoryEstimate e = EstimateRunMemory(input);
  EXPECT_DOUBLE_EQ(e.per_replica_bytes, 1000.0 * 4 * 2);
  EXPECT_DOUBLE_EQ(e.replicas_bytes, 4 * 1000.0 * 4 * 2 + 1000.0 * 4 * 3);  // and the host's weights and slots
  input.replicas = 300;
  input.fold_above = 256;
  input.fold_wave = 16;
  const MemoryEstimate folded = EstimateRunMemory(input);
  EXPECT_TRUE(folded.folded);
  EXPECT_DOUBLE_EQ(folded.per_replica_bytes, 0);
  // A wave's gradients, the sum packed and unpacked, the host's weights and slots.
  EXPECT_DOUBLE_EQ(folded.replicas_bytes, 16 * 1000.0 * 4 + 2 * 1000.0 * 4 + 1000.0 * 4 * 3);
}

TEST(MemoryEstimate, AStagedStepKeepsAWorkspaceForEveryExample) {
  // BatchNormalization: every chunk of the step keeps its activations until the step ends.
  RunMemoryInput input = Input(4);
  input.staged = true;
  EXPECT_DOUBLE_EQ(EstimateRunMemory(input).batch_bytes, 64 * (784 * 4.0 + 32) + 2.0 * 100 * 4 * 64);
  input.global_batch = 8;  // fewer examples than the running tasks hold: the tasks' workspaces
  EXPECT_DOUBLE_EQ(EstimateRunMemory(input).batch_bytes, 8 * (784 * 4.0 + 32) + 2.0 * 100 * 4 * 16 * 2);
  // The statistics' words: per chunk (1 of 16 here, plus one per replica) and per replica.
  input.batch_norm_words = 1000;
  EXPECT_DOUBLE_EQ(EstimateRunMemory(input).batch_bytes,
                   8 * (784 * 4.0 + 32) + 2.0 * 100 * 4 * 16 * 2 + 1000.0 * 8 * (1 + 4 + 4));
}

TEST(MemoryEstimate, StagedWavesKeepAWavesWorkspaces) {
  // Unsynchronized BatchNormalization in waves: a call's passes hold one wave's
  // examples (16 replicas of 4), not the step's 1200, and a wave's statistics words.
  RunMemoryInput input = Input(300);
  input.staged = true;
  input.batch_norm_words = 1000;
  input.global_batch = 1200;
  input.batch_per_replica = 4;
  input.exact = true;
  input.compact = true;
  input.fold_wave = 16;
  const double gathered = 1200 * (784 * 4.0 + 32);
  const double all_at_once = EstimateRunMemory(input).batch_bytes;  // the replicas' words: no waves
  EXPECT_DOUBLE_EQ(all_at_once, gathered + 2.0 * 100 * 4 * 1200 + 1000.0 * 8 * (75 + 300 + 300));
  input.compacts_in_waves = true;
  EXPECT_DOUBLE_EQ(EstimateRunMemory(input).batch_bytes, gathered + 2.0 * 100 * 4 * 64 + 1000.0 * 8 * (4 + 16 + 16));
  input.compacts_in_waves = false;
  input.fold_above = 256;  // folded: waves too
  EXPECT_DOUBLE_EQ(EstimateRunMemory(input).batch_bytes, gathered + 2.0 * 100 * 4 * 64 + 1000.0 * 8 * (4 + 16 + 16));
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

TEST(MemoryEstimate, RanksOfOneMachineShareItsMemory) {
  // Under mpirun each rank counts the machine's memory at its estimate's share of the
  // machine's ranks' estimates together; the process's own limits stay whole.
  const auto alone = AvailableMemoryForRun();
  const auto shared = AvailableMemoryForRun(0, 0, MachineShare{4, 0.25});
  ASSERT_TRUE(alone.has_value() && shared.has_value());
  if (alone->source.find("RLIMIT_AS") == std::string::npos) {
    // Two reads of MemAvailable, microseconds apart.
    EXPECT_NEAR(shared->bytes, alone->bytes / 4, alone->bytes / 100);
    EXPECT_NE(shared->source.find(alone->source + ": "), std::string::npos) << shared->source;
    EXPECT_NE(shared->source.find(" for the 4 ranks on this machine, this rank's share"), std::string::npos)
        << shared->source;
  }
  // --max-memory limits the process alone: the smaller of it and the share counts.
  const auto tiny_share = AvailableMemoryForRun(1.0 * (1 << 30), 0, MachineShare{2, 1e-9});
  ASSERT_TRUE(tiny_share.has_value());
  EXPECT_LT(tiny_share->bytes, 1.0 * (1 << 30));
  EXPECT_EQ(tiny_share->source.find("--max-memory"), std::string::npos) << tiny_share->source;
  if (alone->bytes > 4.0 * (1 << 30)) {
    const auto limited = AvailableMemoryForRun(1.0 * (1 << 30), 0, MachineShare{2, 0.5});
    EXPECT_DOUBLE_EQ(limited->bytes, 1.0 * (1 << 30));
  }
  // One key for every process of the machine: the same on every call.
  EXPECT_EQ(MachineKey(), MachineKey());
}

TEST(MemoryEstimate, TheLargestReplicaCountThatFits) {
  RunMemoryInput input = Input(100000);
  const double available = 8.0 * (1 << 30);
  const std::int32_t most = LargestReplicasThatFit(input, available);
  input.replicas = most;
  EXPECT_LE(EstimateRunMemory(input).total_bytes, available);
  input.replicas = most + 1;
  EXPECT_GT(EstimateRunMemory(input).total_bytes, available);
  // The refusal names it.
  const RunMemoryInput asked = Input(100000);
  const Status refused = CheckRunFitsInMemory(EstimateRunMemory(asked), asked, AvailableMemory{available, "x"});
  EXPECT_NE(refused.message().find("at most " + std::to_string(most) + " replicas would fit"), std::string::npos)
      << refused.message();
  EXPECT_NE(refused.message().find("use fewer --replicas,"), std::string::npos) << refused.message();
  // On an MPI rank the counts are the rank's, and so is the flag to lower.
  RunMemoryInput rank = asked;
  rank.mpi_rank = true;
  const Status rank_refused = CheckRunFitsInMemory(EstimateRunMemory(rank), rank, AvailableMemory{available, "x"});
  const std::string parts[] = {"(100000 replicas on this rank x ",
                               "at most " + std::to_string(most) + " replicas a rank would fit",
                               "use fewer --replicas-per-worker or fewer ranks a machine,"};
  for (const std::string& part : parts)
    EXPECT_NE(rank_refused.message().find(part), std::string::npos) << part << ": " << rank_refused.message();
  EXPECT_EQ(LargestReplicasThatFit(Input(1), 10), 0);  // not even one
  // A batch per replica grows the global batch with the replicas.
  RunMemoryInput growing = Input(4);
  growing.batch_per_replica = 1000;
  growing.batch_limit = 60000;
  EXPECT_LT(LargestReplicasThatFit(growing, 1e8), LargestReplicasThatFit(Input(4), 1e8));
}

// Above fold_above replicas the folded reduction keeps only weights and slots per
// replica, a wave's gradient buffers and the sum, and no message log: only the
// record the cost model prices the collective from, once (two copies while it is
// built), up to kMaxPricedMessages messages. The estimate drops there, and the
// largest count that fits is searched on both sides of it.
TEST(MemoryEstimate, TheFoldedReductionHoldsOneWaveOfGradients) {
  for (const bool exact : {false, true}) {
    RunMemoryInput input = Input(300);
    constexpr double p = 100000;  // beside which a priced record is small, as on seed-cnn
    input.parameter_values = static_cast<std::int64_t>(p);
    input.exact = exact;
    input.fold_above = 256;
    input.fold_wave = 16;
    const MemoryEstimate folded = EstimateRunMemory(input);
    EXPECT_TRUE(folded.folded);
    const double words = exact ? p * kExactWords * 8 : 0.0;
    EXPECT_DOUBLE_EQ(folded.per_replica_bytes, p * 4 * 3);  // weights, 2 slots
    EXPECT_DOUBLE_EQ(folded.replicas_bytes, 300 * p * 4 * 3 + 16 * (exact ? words : p * 4) + 2 * p * 4 + words);
    EXPECT_DOUBLE_EQ(folded.message_log_bytes, 2 * (2 * 300 * 299) * sizeof(Message));  // the ring's 2n(n-1)
    RunMemoryInput unpriced = input;
    unpriced.replicas = 1500;  // 4.5 million messages: not priced
    EXPECT_DOUBLE_EQ(EstimateRunMemory(unpriced).message_log_bytes, 0);
    input.replicas = 256;
    const MemoryEstimate collective = EstimateRunMemory(input);
    EXPECT_FALSE(collective.folded);
    EXPECT_GT(collective.total_bytes, folded.total_bytes);
    // Room for 256 replicas' buffers but not for 255 more: the answer is past the fold.
    const std::int32_t most = LargestReplicasThatFit(input, collective.total_bytes);
    EXPECT_GT(most, 256);
    input.replicas = most;
    EXPECT_LE(EstimateRunMemory(input).total_bytes, collective.total_bytes);
    input.replicas = most + 1;
    EXPECT_GT(EstimateRunMemory(input).total_bytes, collective.total_bytes);
  }
}

// Exact mode's compact all-reduce: where the replicas compute in waves, each replica
// holds its encoded gradient (16 bytes per value, a bound and a mask per 32 values),
// a 7-byte field per value and a float per 32 values to send, and the float state,
// with one wave's words in the slots (with gradient accumulation too: the encoding
// holds the sum); elsewhere it keeps its words and adds the encoding. One replica
// sends nothing and keeps the words alone.
TEST(MemoryEstimate, TheCompactAllReduceHoldsEncodedGradients) {
  RunMemoryInput input = Input(64);
  input.exact = true;
  input.compact = true;
  input.fold_above = 256;
  input.compacts_in_waves = true;
  input.fold_wave = 16;
  const double words = 1000.0 * kExactWords * 8, compact = 1000.0 * (16 + 7 + 14.0 / 32);
  const MemoryEstimate waves = EstimateRunMemory(input);
  EXPECT_DOUBLE_EQ(waves.per_replica_bytes, 1000.0 * 4 * 5 + compact);  // weights, 2 slots, the reduced gradient twice
  EXPECT_DOUBLE_EQ(waves.replicas_bytes, 64 * waves.per_replica_bytes + 16 * words);
  input.accumulating = true;
  EXPECT_DOUBLE_EQ(EstimateRunMemory(input).replicas_bytes, waves.replicas_bytes);
  input.accumulating = false;
  input.fold_above = -1;  // no fold (accumulation, or MPI ranks): waves at any count
  input.replicas = 300;
  EXPECT_DOUBLE_EQ(EstimateRunMemory(input).replicas_bytes, 300 * waves.per_replica_bytes + 16 * words);
  input.replicas = 64;
  input.compacts_in_waves = false;  // where the replicas cannot compute in waves: the words, then their encoding
  EXPECT_DOUBLE_EQ(EstimateRunMemory(input).per_replica_bytes, 1000.0 * 4 * 5 + words + compact);
  input.compact = false;
  const MemoryEstimate plain = EstimateRunMemory(input);
  EXPECT_DOUBLE_EQ(plain.per_replica_bytes, 1000.0 * 4 * 5 + words);
  EXPECT_DOUBLE_EQ(waves.message_log_bytes, 2 * plain.message_log_bytes);  // two rounds
  input.compact = true;
  input.replicas = 1;
  EXPECT_DOUBLE_EQ(EstimateRunMemory(input).per_replica_bytes, plain.per_replica_bytes);
  // One replica on an MPI rank still sends (the cluster has the other ranks'): its
  // encoding, and its words in the wave's slot. Its fields are reduce-scattered an
  // int64 each, not packed seven bytes to a value, and each block's 8-byte header
  // beside them: 1000 + 250 bytes more here.
  input.mpi_rank = true;
  input.compacts_in_waves = true;
  const MemoryEstimate one = EstimateRunMemory(input);
  EXPECT_DOUBLE_EQ(one.per_replica_bytes, waves.per_replica_bytes + 1000 + 250);
  // In pieces of kCompactScatterPiece values: past one, a piece's fields, not all.
  input.parameter_values = 3 * kCompactScatterPiece;
  const double big = EstimateRunMemory(input).per_replica_bytes;
  input.mpi_rank = false;
  input.replicas = 2;  // the same replica, in one process: every value's 7-byte field
  EXPECT_DOUBLE_EQ(big, EstimateRunMemory(input).per_replica_bytes - 7.0 * 3 * kCompactScatterPiece +
                            8.0 * kCompactScatterPiece + 8.0 * 3 * kCompactScatterPiece / kCompactBlock);
  input.mpi_rank = true;
  input.replicas = 1;
  input.parameter_values = 1000;
  EXPECT_DOUBLE_EQ(one.replicas_bytes, one.per_replica_bytes + words);
}

TEST(MemoryEstimate, MaxMemoryLimitsThePeak) {
  const auto limited = AvailableMemoryForRun(1.0 * (1 << 30), 200.0 * (1 << 20));
  ASSERT_TRUE(limited.has_value());
  EXPECT_DOUBLE_EQ(limited->bytes, 824.0 * (1 << 20));  // the limit less what is resident
  EXPECT_NE(limited->source.find("--max-memory 1.0 GiB less the 200.0 MiB"), std::string::npos) << limited->source;
  EXPECT_GT(ResidentBytes(), 0);
}

TEST(MemoryEstimate, ParseByteSize) {
  EXPECT_EQ(*ParseByteSize("4G", "--max-memory"), 4.0 * (1 << 30));
  EXPECT_EQ(*ParseByteSize("512 MiB", "--max-memory"), 512.0 * (1 << 20));
  EXPECT_EQ(*ParseByteSize("1.5GB", "--max-memory"), 1.5e9);
  EXPECT_EQ(*ParseByteSize("1e6", "--max-memory"), 1e6);
  EXPECT_EQ(*ParseByteSize("100B", "--max-memory"), 100.0);
  for (const char* bad : {"", "0", "-4G", "4X", "inf", "nan", "0x10", "G", "1e400", "4 G B", "1e30T", "\x01"}) {
    const auto parsed = ParseByteSize(bad, "--max-memory");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("--max-memory must be a size above 0"), std::string::npos);
  }
}

TEST(MemoryEstimate, BytesText) {
  EXPECT_EQ(BytesText(80), "80 B");
  EXPECT_EQ(BytesText(1536), "1.5 KiB");
  EXPECT_EQ(BytesText(8.0 * (1 << 30)), "8.0 GiB");
}

}  // namespace
}  // namespace dtlab
