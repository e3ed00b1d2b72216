#include "scenarios/all_reduce_drawing.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "sim/comm/transport.h"

namespace dtlab {
namespace {

// Carries out a schedule over small in-memory buffers (in place: input and output
// are the same buffer) and draws the buffers after every phase.
class DrawingTransport final : public Transport<double> {
 public:
  DrawingTransport(std::vector<std::vector<double>>& buffers, std::string& text) : buffers_(buffers), text_(text) {}
  std::int32_t num_replicas() const override { return static_cast<std::int32_t>(buffers_.size()); }
  void BeginTransfer(std::int32_t combiner, std::int64_t count, bool divide) override {
    transfers_.push_back({combiner, count, divide, {}, {}});
  }
  void AddSource(std::int32_t replica, BufferRole, std::int64_t offset, std::int32_t phase) override {
    transfers_.back().sources.push_back({replica, offset});
    phase_ = phase;
  }
  void AddDestination(std::int32_t replica, std::int64_t offset, std::int32_t phase) override {
    transfers_.back().destinations.push_back({replica, offset});
    phase_ = phase;
  }
  void Run() override {
    // Every transfer reads before any writes (a schedule never lets two conflict).
    std::vector<std::vector<double>> results;
    std::set<std::pair<std::int32_t, std::int32_t>> sends;  // (from, to)
    std::string arrows;
    for (const Transfer& t : transfers_) {
      std::vector<double> sum(static_cast<std::size_t>(t.count), 0.0);
      for (const auto& [replica, offset] : t.sources) {
        for (std::int64_t i = 0; i < t.count; ++i) sum[static_cast<std::size_t>(i)] += buffers_[replica][offset + i];
        if (replica != t.combiner) arrows += Arrow(replica, t.combiner, offset, t.count);
      }
      if (t.divide)
        for (double& v : sum) v /= static_cast<double>(buffers_.size());
      for (const auto& [replica, offset] : t.destinations)
        if (replica != t.combiner) arrows += Arrow(t.combiner, replica, offset, t.count);
      results.push_back(std::move(sum));
    }
    for (std::size_t k = 0; k < transfers_.size(); ++k)
      for (const auto& [replica, offset] : transfers_[k].destinations)
        std::copy(results[k].begin(), results[k].end(), buffers_[replica].begin() + offset);
    ++phases;
    text_ += "phase " + std::to_string(phases) + ":" + arrows + "\n";
    Draw(text_, buffers_);
    transfers_.clear();
  }
  static void Draw(std::string& text, const std::vector<std::vector<double>>& buffers) {
    for (std::size_t r = 0; r < buffers.size(); ++r) {
      char head[32];
      std::snprintf(head, sizeof head, "  replica %zu:", r);
      text += head;
      for (const double v : buffers[r]) {
        char value[32];
        std::snprintf(value, sizeof value, " %4g", v);
        text += value;
      }
      text += "\n";
    }
  }
  std::int32_t phases = 0;
  std::int64_t messages = 0;

 private:
  struct Transfer {
    std::int32_t combiner;
    std::int64_t count;
    bool divide;
    std::vector<std::pair<std::int32_t, std::int64_t>> sources, destinations;
  };
  std::string Arrow(std::int32_t from, std::int32_t to, std::int64_t offset, std::int64_t count) {
    ++messages;
    char text[64];
    std::snprintf(text, sizeof text, "  %d->%d [%lld..%lld]", from, to, static_cast<long long>(offset),
                  static_cast<long long>(offset + count - 1));
    return text;
  }
  std::vector<std::vector<double>>& buffers_;
  std::string& text_;
  std::vector<Transfer> transfers_;
  std::int32_t phase_ = 0;
};

}  // namespace

AllReduceDrawing DrawAllReduce(std::int32_t replicas, AllReduceAlgorithm algorithm, std::int64_t count,
                               std::int32_t replicas_per_worker) {
  AllReduceDrawing drawing;
  std::vector<std::vector<double>> buffers(static_cast<std::size_t>(replicas));
  std::vector<double> expected(static_cast<std::size_t>(count), 0.0);
  for (std::int32_t r = 0; r < replicas; ++r)
    for (std::int64_t i = 0; i < count; ++i) {
      buffers[r].push_back(10.0 * (r + 1) + static_cast<double>(i));
      expected[static_cast<std::size_t>(i)] += buffers[r].back();
    }
  drawing.text = "start: element i of replica r is 10 * (r + 1) + i; \"a->b [i..j]\" sends elements i..j\n";
  DrawingTransport::Draw(drawing.text, buffers);
  DrawingTransport transport(buffers, drawing.text);
  ScheduleAllReduce<double>(transport, algorithm, count, ReduceOp::kSum, replicas_per_worker);
  drawing.phases = transport.phases;
  drawing.messages = transport.messages;
  drawing.correct = std::all_of(buffers.begin(), buffers.end(), [&](const auto& b) { return b == expected; });
  return drawing;
}

}  // namespace dtlab
