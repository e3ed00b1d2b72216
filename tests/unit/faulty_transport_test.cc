// FaultyTransport (sim/comm/faulty_transport.h) wraps any transport, not only the
// in-process one: here a fake that only records the calls it gets. A clean phase
// reaches it call for call; a dead replica, a dropped or a corrupted message stops
// the phase before the fake sees any of it, with the failure texts the collectives
// report (tests/unit/faults_test.cc runs them through the real collectives).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/comm/faulty_transport.h"

namespace dtlab {
namespace {

// Records every call as a line of text; its buffers (replica r's element k is
// 10 * r + k) are only read, through SourceData.
class RecordingTransport final : public Transport<float> {
 public:
  explicit RecordingTransport(std::int32_t replicas, bool readable = true)
      : buffers_(static_cast<std::size_t>(replicas)), readable_(readable) {
    for (std::int32_t r = 0; r < replicas; ++r)
      for (int k = 0; k < 8; ++k) buffers_[static_cast<std::size_t>(r)].push_back(static_cast<float>(10 * r + k));
  }
  std::int32_t num_replicas() const override { return static_cast<std::int32_t>(buffers_.size()); }
  void BeginTransfer(std::int32_t combiner, std::int64_t count, bool divide) override {
    calls.push_back("begin " + std::to_string(combiner) + " " + std::to_string(count) + (divide ? " mean" : ""));
  }
  void AddSource(std::int32_t replica, BufferRole role, std::int64_t offset, std::int32_t phase) override {
    calls.push_back("source " + std::to_string(replica) + (role == BufferRole::kInput ? " input " : " output ") +
                    std::to_string(offset) + " phase " + std::to_string(phase));
  }
  void AddDestination(std::int32_t replica, std::int64_t offset, std::int32_t phase) override {
    calls.push_back("destination " + std::to_string(replica) + " " + std::to_string(offset) + " phase " +
                    std::to_string(phase));
  }
  void Run() override { calls.push_back("run"); }
  const float* SourceData(std::int32_t replica, BufferRole, std::int64_t offset) const override {
    return readable_ ? buffers_[static_cast<std::size_t>(replica)].data() + offset : nullptr;
  }

  std::vector<std::string> calls;

 private:
  std::vector<std::vector<float>> buffers_;
  bool readable_;
};

// One phase (phase 0) of 3 replicas: replica 0 sums elements [0, 4) of replicas 0,
// 1, 2 and stores the mean to replicas 0 and 2; replica 1 copies its own
// elements [4, 8) to replica 0; an empty transfer of replica 2 sends nothing.
void EmitPhase(Transport<float>& transport) {
  transport.BeginTransfer(0, 4, true);
  transport.AddSource(0, BufferRole::kInput, 0, 0);
  transport.AddSource(1, BufferRole::kInput, 0, 0);
  transport.AddDestination(0, 0, 0);
  transport.AddSource(2, BufferRole::kOutput, 0, 0);
  transport.AddDestination(2, 0, 0);
  transport.BeginTransfer(1, 4, false);
  transport.AddSource(1, BufferRole::kInput, 4, 0);
  transport.AddDestination(0, 4, 0);
  transport.BeginTransfer(2, 0, false);
  transport.AddSource(0, BufferRole::kInput, 0, 0);
  transport.AddDestination(1, 0, 0);
  transport.Run();
}

// Faults of step 7 for 3 live replicas, timeout 60 s.
void StepSeven(MessageFaults& faults) {
  faults.step = 7;
  faults.dead.assign(3, 0);
}

FaultSpec MessageFault(FaultKind kind, std::int32_t replica, std::int32_t to = -1, std::int32_t phase = 0) {
  FaultSpec fault;
  fault.kind = kind;
  fault.replica = replica;
  fault.step = 7;
  fault.to = to;
  fault.phase = phase;
  return fault;
}

TEST(FaultyTransport, CleanPhaseIsHandedOnCallForCall) {
  RecordingTransport direct(3), wrapped(3);
  EmitPhase(direct);
  MessageFaults faults;
  StepSeven(faults);
  faults.messages.push_back(MessageFault(FaultKind::kDrop, 1));
  faults.messages.back().step = 8;  // another step's fault changes nothing
  FaultyTransport<float> faulty(wrapped, faults);
  EXPECT_EQ(faulty.num_replicas(), 3);
  EmitPhase(faulty);
  EmitPhase(faulty);
  EXPECT_FALSE(faults.failed()) << faults.failure;
  ASSERT_EQ(direct.calls.size(), 13u);
  std::vector<std::string> twice = direct.calls;
  twice.insert(twice.end(), direct.calls.begin(), direct.calls.end());
  EXPECT_EQ(wrapped.calls, twice);
  EXPECT_EQ(faulty.SourceData(1, BufferRole::kInput, 2), wrapped.SourceData(1, BufferRole::kInput, 2));
}

TEST(FaultyTransport, DroppedMessageStopsThePhase) {
  RecordingTransport wrapped(3);
  MessageFaults faults;
  StepSeven(faults);
  faults.messages.push_back(MessageFault(FaultKind::kDrop, 1));
  FaultyTransport<float> faulty(wrapped, faults);
  EmitPhase(faulty);
  EXPECT_TRUE(wrapped.calls.empty()) << "the wrapped transport saw a failed phase";
  EXPECT_EQ(faults.failure,
            "the message replica 1 -> replica 0 of phase 1 (4 elements) was dropped and never arrived; replica 0 "
            "timed out after 60 s");
  // A failed collective moves nothing more: later phases never reach the wrapped transport either.
  EmitPhase(faulty);
  EXPECT_TRUE(wrapped.calls.empty());
}

TEST(FaultyTransport, DeadReplicaStopsThePhase) {
  RecordingTransport wrapped(3);
  MessageFaults faults;
  StepSeven(faults);
  faults.dead[2] = 1;
  faults.timeout_seconds = 2.5;
  FaultyTransport<float> faulty(wrapped, faults);
  EmitPhase(faulty);
  EXPECT_TRUE(wrapped.calls.empty());
  // Sources are checked before destinations: 1 -> 0 passes, 2 -> 0 is the first to touch replica 2.
  EXPECT_EQ(faults.failure,
            "timed out after 2.5 s waiting for replica 2, which stopped responding (the message replica 2 -> "
            "replica 0 of phase 1 (4 elements))");
}

TEST(FaultyTransport, CorruptedMessageNamesItsChecksums) {
  RecordingTransport wrapped(3);
  MessageFaults faults;
  StepSeven(faults);
  faults.messages.push_back(MessageFault(FaultKind::kCorrupt, 0, 2));  // the result 0 -> 2
  FaultyTransport<float> faulty(wrapped, faults);
  EmitPhase(faulty);
  EXPECT_TRUE(wrapped.calls.empty());
  // The payload is the transfer's first addend, replica 0's elements [0, 4).
  const float payload[4] = {0, 1, 2, 3};
  EXPECT_EQ(faults.failure, "the message replica 0 -> replica 2 of phase 1 (4 elements) arrived corrupted (" +
                                CorruptedChecksums(payload, 4) + ")");
  EXPECT_NE(CorruptedChecksums(payload, 4).find("CRC-32 "), std::string::npos);
  EXPECT_NE(CorruptedChecksums(payload, 4).substr(7, 8), CorruptedChecksums(payload, 4).substr(22, 8))
      << "sent and received checksums must differ";

  // A transport that cannot read the payload still reports the corruption.
  RecordingTransport unreadable(3, false);
  MessageFaults blind;
  StepSeven(blind);
  blind.messages.push_back(MessageFault(FaultKind::kCorrupt, 1));
  FaultyTransport<float> blind_faulty(unreadable, blind);
  EmitPhase(blind_faulty);
  EXPECT_TRUE(unreadable.calls.empty());
  EXPECT_EQ(blind.failure,
            "the message replica 1 -> replica 0 of phase 1 (4 elements) arrived corrupted (its CRC-32 check failed)");
}

TEST(FaultyTransport, AFaultHitsOneMessageOnly) {
  RecordingTransport wrapped(3);
  MessageFaults faults;
  StepSeven(faults);
  // Replica 1 sends in phase 1 only; a fault for phase 2 of the step matches nothing here.
  faults.messages.push_back(MessageFault(FaultKind::kDrop, 1, -1, 2));
  FaultyTransport<float> faulty(wrapped, faults);
  EmitPhase(faulty);
  EXPECT_FALSE(faults.failed());
  EXPECT_EQ(wrapped.calls.size(), 13u);
  // The matching message of the next phase is dropped, and the fault is spent.
  auto next_phase = [](Transport<float>& transport) {
    transport.BeginTransfer(0, 2, false);
    transport.AddSource(1, BufferRole::kOutput, 0, 1);
    transport.AddDestination(0, 0, 1);
    transport.Run();
  };
  next_phase(faulty);
  EXPECT_EQ(wrapped.calls.size(), 13u);
  EXPECT_EQ(faults.failure,
            "the message replica 1 -> replica 0 of phase 2 (2 elements) was dropped and never arrived; replica 0 "
            "timed out after 60 s");
  EXPECT_EQ(faults.messages[0].step, -1) << "a fault hits one message";

  // Two drop faults of one sender: the first hits its first message (0 -> 2: the empty
  // transfer's 0 -> 2 sends nothing), the second is left unspent.
  MessageFaults two;
  StepSeven(two);
  two.messages = {MessageFault(FaultKind::kDrop, 0), MessageFault(FaultKind::kDrop, 0)};
  RecordingTransport other(3);
  FaultyTransport<float> faulty_other(other, two);
  EmitPhase(faulty_other);
  EXPECT_EQ(two.failure,
            "the message replica 0 -> replica 2 of phase 1 (4 elements) was dropped and never arrived; replica 2 "
            "timed out after 60 s");
  EXPECT_EQ(two.messages[0].step, -1);
  EXPECT_EQ(two.messages[1].step, 7);
}

}  // namespace
}  // namespace dtlab
