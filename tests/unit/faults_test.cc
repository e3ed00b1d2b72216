// Fault injection (sim/comm/faults.h): the fault syntax, and the collectives' detection
// of dead replicas, dropped and corrupted messages for every algorithm, in float and
// in exact mode's int64 words; a fault that matches no message changes nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/engines/cluster.h"
#include "sim/comm/collectives.h"
#include "sim/comm/faults.h"

namespace dtlab {
namespace {

TEST(FaultSpec, ParsesEveryKindAndWritesItBack) {
  for (const std::string text :
       {"throw:replica=1,step=3,layer=dense", "die:replica=2,step=5", "straggler:replica=0,step=4,seconds=90",
        "drop:replica=1,step=2,to=2,phase=1", "corrupt:replica=3,step=7", "nan:replica=3,step=6,variable=dense/kernel",
        "nan:replica=0,step=1,value=inf"}) {
    auto fault = ParseFaultSpec(text);
    ASSERT_TRUE(fault.ok()) << text << ": " << fault.status().ToString();
    EXPECT_EQ(FaultSpecText(*fault), text);
  }
  auto straggler = ParseFaultSpec("straggler:step=4,replica=2,seconds=2.5");
  ASSERT_TRUE(straggler.ok());
  EXPECT_EQ(straggler->kind, FaultKind::kStraggler);
  EXPECT_EQ(straggler->replica, 2);
  EXPECT_EQ(straggler->step, 4);
  EXPECT_DOUBLE_EQ(straggler->seconds, 2.5);
}

TEST(FaultSpec, BadSpecsNameTheProblem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"explode:replica=1,step=1", "unknown fault kind 'explode' (expected one of: throw, die, straggler, drop"},
      {"die:replica=1", "replica and step are required"},
      {"die:replica=1,step=0", "step must be an integer in [1, 9223372036854775807], got '0'"},
      {"die:replica=-1,step=2", "replica must be an integer in [0, 2147483647], got '-1'"},
      // Each field in its own type: nothing wraps to 32 bits (issue 19).
      {"die:replica=2147483648,step=1", "replica must be an integer in [0, 2147483647], got '2147483648'"},
      {"die:replica=4294967297,step=1", "replica must be an integer in [0, 2147483647], got '4294967297'"},
      {"drop:replica=0,step=1,to=4294967298", "to must be an integer in [0, 2147483647], got '4294967298'"},
      {"drop:replica=0,step=1,phase=4294967296", "phase must be an integer in [1, 2147483647], got '4294967296'"},
      {"die:replica=0,step=9223372036854775808", "step must be an integer in [1, 9223372036854775807]"},
      {"die:replica=1x,step=1", "replica must be an integer in [0, 2147483647], got '1x'"},
      {"die:replica=,step=1", "replica must be an integer in [0, 2147483647], got ''"},
      {"die:replica=1,step=2,seconds=3", "unknown key 'seconds' for die (allowed: replica, step)"},
      {"straggler:replica=1,step=2", "a straggler needs seconds=S"},
      {"straggler:replica=1,step=2,seconds=-1", "seconds must be a positive number"},
      {"nan:replica=1,step=2,value=zero", "value must be nan or inf"},
      {"drop:replica=1,step=2,step=3", "'step' given twice"},
      {"drop:replica=1,step2", "'step2' is not key=value"},
  };
  for (const auto& [text, message] : cases) {
    auto fault = ParseFaultSpec(text);
    ASSERT_FALSE(fault.ok()) << text;
    EXPECT_EQ(fault.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(fault.status().message().find(message), std::string::npos) << fault.status().message();
  }
}

// A parsed fault is checked against the cluster: replica and to index its replicas.
TEST(FaultSpec, ClusterRefusesReplicasItLacks) {
  ClusterConfig config;
  config.replicas = 2;
  config.strategy = StrategyKind::kMirrored;
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"die:replica=2,step=1",
            "fault die:replica=2,step=1: replica=2 names no replica; there are 2 replicas, so "
            "replica must be from 0 to 1"},
           {"drop:replica=0,step=1,to=5", "to=5 names no replica; there are 2 replicas, so to must be from 0 to 1"}}) {
    config.faults = {*ParseFaultSpec(text)};
    const Status status = config.Validate();
    EXPECT_EQ(status.code(), Status::Code::kInvalidArgument) << text;
    EXPECT_NE(status.message().find(message), std::string::npos) << status.message();
  }
  config.faults = {*ParseFaultSpec("drop:replica=1,step=1,to=0")};
  EXPECT_TRUE(config.Validate().ok());
}

// Runs an all-reduce of `n` replicas x `count` elements with `faults`; returns the buffers.
template <typename T>
std::vector<std::vector<T>> RunAllReduce(AllReduceAlgorithm algorithm, std::int32_t n, std::int64_t count,
                                         MessageFaults* faults) {
  std::vector<std::vector<T>> data(static_cast<std::size_t>(n));
  for (std::int32_t r = 0; r < n; ++r)
    for (std::int64_t i = 0; i < count; ++i) data[r].push_back(static_cast<T>((r + 1) * 3 + i % 7));
  std::vector<std::span<T>> buffers;
  for (auto& d : data) buffers.emplace_back(d);
  CollectiveOptions options;
  options.algorithm = algorithm;
  options.replicas_per_worker = algorithm == AllReduceAlgorithm::kHierarchical ? 2 : 0;
  options.step = 7;
  options.faults = faults;
  AllReduce<T>(std::span<const std::span<T>>(buffers), ReduceOp::kSum, options);
  return data;
}

// Faults of step 7 for `n` live replicas, with one message fault of `kind` sent by `replica` at `step`.
void Prepare(MessageFaults& faults, std::int32_t n, FaultKind kind, std::int32_t replica, std::int64_t step) {
  faults.step = 7;
  faults.dead.assign(static_cast<std::size_t>(n), 0);
  FaultSpec fault;
  fault.kind = kind;
  fault.replica = replica;
  fault.step = step;
  faults.messages.push_back(fault);
}

constexpr AllReduceAlgorithm kAlgorithms[] = {AllReduceAlgorithm::kRing, AllReduceAlgorithm::kHalvingDoubling,
                                              AllReduceAlgorithm::kNaive, AllReduceAlgorithm::kHierarchical,
                                              AllReduceAlgorithm::kDirect};

TEST(MessageFaults, FaultsOfOtherStepsChangeNothing) {
  for (const auto algorithm : kAlgorithms) {
    MessageFaults faults;
    Prepare(faults, 4, FaultKind::kDrop, 1, 8);  // not this step
    const auto expected = RunAllReduce<float>(algorithm, 4, 100, nullptr);
    EXPECT_EQ(RunAllReduce<float>(algorithm, 4, 100, &faults), expected);
    EXPECT_FALSE(faults.failed());
  }
}

TEST(MessageFaults, DeadReplicaTimesOutEveryAlgorithm) {
  for (const auto algorithm : kAlgorithms) {
    MessageFaults faults;
    faults.step = 7;
    faults.dead = {0, 0, 1, 0};
    faults.timeout_seconds = 30;
    RunAllReduce<float>(algorithm, 4, 100, &faults);
    ASSERT_TRUE(faults.failed()) << AllReduceAlgorithmName(algorithm);
    EXPECT_NE(faults.failure.find("timed out after 30 s waiting for replica 2, which stopped responding"),
              std::string::npos)
        << faults.failure;
  }
}

TEST(MessageFaults, DroppedMessageNamesSenderReceiverAndPhase) {
  MessageFaults faults;
  Prepare(faults, 3, FaultKind::kDrop, 1, 7);
  faults.messages[0].phase = 2;
  RunAllReduce<float>(AllReduceAlgorithm::kRing, 3, 6, &faults);
  EXPECT_EQ(faults.failure,
            "the message replica 1 -> replica 2 of phase 2 (2 elements) was dropped and never arrived; replica 2 "
            "timed out after 60 s");
}

TEST(MessageFaults, CorruptedMessageFailsItsChecksumInFloatAndInAccumulatorWords) {
  for (const auto algorithm : kAlgorithms) {
    for (const bool words : {false, true}) {
      MessageFaults faults;
      Prepare(faults, 4, FaultKind::kCorrupt, 3, 7);
      if (words)
        RunAllReduce<std::int64_t>(algorithm, 4, 64, &faults);
      else
        RunAllReduce<float>(algorithm, 4, 64, &faults);
      ASSERT_TRUE(faults.failed()) << AllReduceAlgorithmName(algorithm);
      EXPECT_NE(faults.failure.find("the message replica 3 -> "), std::string::npos) << faults.failure;
      EXPECT_NE(faults.failure.find("arrived corrupted (CRC-32 "), std::string::npos) << faults.failure;
    }
  }
}

TEST(MessageFaults, OnlyTheFirstFailureIsKept) {
  MessageFaults faults;
  faults.Fail("first");
  faults.Fail("second");
  EXPECT_EQ(faults.failure, "first");
}

}  // namespace
}  // namespace dtlab
