// The transport changes, the schedule does not: every all-reduce schedule run over
// a second, deliberately simple transport (serial, one element at a time, its own
// buffers) gives the same bits as the in-process transport, for random floats whose
// sums depend on the order of their addends.
#include <gtest/gtest.h>

#include <vector>

#include "core/rng.h"
#include "sim/comm/collectives.h"

namespace dtlab {
namespace {

// A transport that carries out each phase serially, transfer by transfer, element
// by element. Addresses buffers by (replica, role, offset) only, as a remote
// backend would.
class SerialTransport final : public Transport<float> {
 public:
  SerialTransport(std::vector<std::vector<float>> inputs)
      : inputs_(std::move(inputs)), outputs_(inputs_.size(), std::vector<float>(inputs_[0].size())) {}
  std::int32_t num_replicas() const override { return static_cast<std::int32_t>(inputs_.size()); }
  void BeginTransfer(std::int32_t combiner, std::int64_t count, bool divide) override {
    phase_.push_back({combiner, count, divide, {}, {}});
  }
  void AddSource(std::int32_t replica, BufferRole role, std::int64_t offset, std::int32_t) override {
    phase_.back().sources.push_back({replica, role, offset});
  }
  void AddDestination(std::int32_t replica, std::int64_t offset, std::int32_t) override {
    phase_.back().destinations.push_back({replica, BufferRole::kOutput, offset});
  }
  void Run() override {
    // Read every source of the phase first (messages in flight), then store.
    std::vector<std::vector<float>> results;
    for (const auto& t : phase_) {
      std::vector<float> sum(static_cast<std::size_t>(t.count));
      for (std::int64_t k = 0; k < t.count; ++k) {
        float s = At(t.sources[0], k);
        for (std::size_t i = 1; i < t.sources.size(); ++i) s += At(t.sources[i], k);
        if (t.divide) s /= static_cast<float>(num_replicas());
        sum[static_cast<std::size_t>(k)] = s;
      }
      results.push_back(std::move(sum));
    }
    for (std::size_t i = 0; i < phase_.size(); ++i)
      for (const auto& d : phase_[i].destinations)
        for (std::int64_t k = 0; k < phase_[i].count; ++k)
          outputs_[static_cast<std::size_t>(d.replica)][static_cast<std::size_t>(d.offset + k)] =
              results[i][static_cast<std::size_t>(k)];
    phase_.clear();
    ++phases_;
  }
  const std::vector<std::vector<float>>& outputs() const { return outputs_; }
  int phases() const { return phases_; }

 private:
  struct Ref {
    std::int32_t replica;
    BufferRole role;
    std::int64_t offset;
  };
  struct Transfer {
    std::int32_t combiner;
    std::int64_t count;
    bool divide;
    std::vector<Ref> sources, destinations;
  };
  float At(const Ref& ref, std::int64_t k) const {
    const auto& buffer = ref.role == BufferRole::kInput ? inputs_ : outputs_;
    return buffer[static_cast<std::size_t>(ref.replica)][static_cast<std::size_t>(ref.offset + k)];
  }
  std::vector<std::vector<float>> inputs_, outputs_;
  std::vector<Transfer> phase_;
  int phases_ = 0;
};

TEST(Transport, EveryScheduleGivesTheSameBitsOnAnotherTransport) {
  for (const auto algorithm : kAllReduceAlgorithms)
    for (const std::int32_t n : {2, 3, 5, 8, 12})
      for (const std::int64_t size : {1, 7, 64, 1001})
        for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
          const std::int32_t per_worker = n % 2 == 0 ? 2 : 0;
          std::vector<std::vector<float>> inputs(static_cast<std::size_t>(n), std::vector<float>(size));
          for (std::int32_t r = 0; r < n; ++r) {
            CounterRng rng(3, RngPurpose::kTest, static_cast<std::uint64_t>(r));
            for (auto& x : inputs[static_cast<std::size_t>(r)])
              x = (rng.UniformFloat() - 0.5f) * (1 + 1000 * rng.UniformFloat());
          }
          SerialTransport serial(inputs);
          ScheduleAllReduce<float>(serial, algorithm, size, op, per_worker);
          std::vector<std::vector<float>> in_process = inputs;
          std::vector<std::span<float>> spans(in_process.begin(), in_process.end());
          CollectiveOptions options;
          options.algorithm = algorithm;
          options.replicas_per_worker = per_worker;
          AllReduce<float>(spans, op, options);
          for (std::int32_t r = 0; r < n; ++r)
            ASSERT_EQ(serial.outputs()[static_cast<std::size_t>(r)], in_process[static_cast<std::size_t>(r)])
                << AllReduceAlgorithmName(algorithm) << " n=" << n << " size=" << size << " replica " << r;
          EXPECT_GT(serial.phases(), 0);
        }
}

}  // namespace
}  // namespace dtlab
