#include "sim/comm/message_log.h"

#include <algorithm>
#include <tuple>

namespace dtlab {

void MessageLog::Begin(std::string name, std::int64_t step, std::int32_t num_replicas, std::int64_t bytes_per_replica) {
  CollectiveRecord record;
  record.name = std::move(name);
  record.step = step;
  record.num_replicas = num_replicas;
  record.bytes_per_replica = bytes_per_replica;
  collectives_.push_back(std::move(record));
}

void MessageLog::Record(const Message& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  collectives_.back().messages.push_back(message);
}

void MessageLog::End() {
  CollectiveRecord& record = collectives_.back();
  std::sort(record.messages.begin(), record.messages.end(), [](const Message& a, const Message& b) {
    return std::tie(a.phase, a.sender, a.receiver, a.bytes) < std::tie(b.phase, b.sender, b.receiver, b.bytes);
  });
  record.num_phases = record.messages.empty() ? 0 : record.messages.back().phase + 1;
}

std::int64_t MessageLog::TotalBytes() const {
  std::int64_t total = 0;
  for (const auto& c : collectives_)
    for (const auto& m : c.messages) total += m.bytes;
  return total;
}

}  // namespace dtlab
