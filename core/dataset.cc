#include "core/dataset.h"

#include <algorithm>
#include <utility>

#include "core/rng.h"

namespace dtlab {

// A stream of items stored flat: the element indices of all items back to back.
// Item i is values[item_starts[i] .. item_starts[i+1]); when item_starts is empty
// every item is the single index values[i] (the stream is not batched yet).
struct Pipeline::Stream {
  std::vector<std::int64_t> values;
  std::vector<std::int64_t> item_starts;

  bool unit_items() const { return item_starts.empty(); }
  std::int64_t num_items() const {
    return unit_items() ? static_cast<std::int64_t>(values.size()) : static_cast<std::int64_t>(item_starts.size()) - 1;
  }

  // The stream of the items at `positions`, in that order.
  Stream Select(const std::vector<std::int64_t>& positions) const {
    Stream result;
    if (unit_items()) {
      result.values.reserve(positions.size());
      for (const std::int64_t p : positions) result.values.push_back(values[p]);
      return result;
    }
    result.item_starts.reserve(positions.size() + 1);
    result.item_starts.push_back(0);
    for (const std::int64_t p : positions) {
      result.values.insert(result.values.end(), values.begin() + item_starts[p], values.begin() + item_starts[p + 1]);
      result.item_starts.push_back(static_cast<std::int64_t>(result.values.size()));
    }
    return result;
  }

  // Keeps the first `count` items.
  void Truncate(std::int64_t count) {
    if (count >= num_items()) return;
    if (unit_items()) {
      values.resize(static_cast<std::size_t>(count));
    } else {
      item_starts.resize(static_cast<std::size_t>(count + 1));
      values.resize(static_cast<std::size_t>(item_starts.back()));
    }
  }

  // Appends the items of `other`, which must be batched alike.
  void Append(const Stream& other) {
    if (unit_items()) {
      values.insert(values.end(), other.values.begin(), other.values.end());
      return;
    }
    const std::int64_t offset = static_cast<std::int64_t>(values.size());
    values.insert(values.end(), other.values.begin(), other.values.end());
    for (std::size_t i = 1; i < other.item_starts.size(); ++i) {
      item_starts.push_back(other.item_starts[i] + offset);
    }
  }

  // Groups consecutive items into batches of `batch_size`.
  void Batch(std::int64_t batch_size, bool drop_remainder) {
    const std::int64_t items = num_items();
    const std::int64_t kept = drop_remainder ? items - items % batch_size : items;
    std::vector<std::int64_t> new_starts;
    new_starts.reserve(static_cast<std::size_t>((kept + batch_size - 1) / batch_size + 1));
    for (std::int64_t i = 0; i < kept; i += batch_size) {
      new_starts.push_back(unit_items() ? i : item_starts[i]);
    }
    const std::int64_t end = unit_items() ? kept : item_starts[kept];
    new_starts.push_back(end);
    values.resize(static_cast<std::size_t>(end));
    item_starts = std::move(new_starts);
  }
};

namespace {

// TF's buffered shuffle of positions 0 .. num_items-1.
std::vector<std::int64_t> ShuffledPositions(std::int64_t num_items, std::int64_t buffer_size, CounterRng& rng) {
  std::vector<std::int64_t> order;
  order.reserve(static_cast<std::size_t>(num_items));
  std::vector<std::int64_t> buffer;
  const std::int64_t filled = std::min(buffer_size, num_items);
  buffer.reserve(static_cast<std::size_t>(filled));
  for (std::int64_t p = 0; p < filled; ++p) buffer.push_back(p);
  for (std::int64_t next = filled; next < num_items; ++next) {
    const auto slot = static_cast<std::size_t>(rng.UniformInt(buffer.size()));
    order.push_back(buffer[slot]);
    buffer[slot] = next;
  }
  while (!buffer.empty()) {
    const auto slot = static_cast<std::size_t>(rng.UniformInt(buffer.size()));
    order.push_back(buffer[slot]);
    buffer[slot] = buffer.back();
    buffer.pop_back();
  }
  return order;
}

}  // namespace

Pipeline::Pipeline(std::int64_t num_elements) : num_elements_(std::max<std::int64_t>(num_elements, 0)) {}

Status Pipeline::Shuffle(std::int64_t buffer_size, std::uint64_t seed, bool reshuffle_each_iteration) {
  if (buffer_size < 1) {
    return Status::InvalidArgument("shuffle buffer_size must be at least 1, got " + std::to_string(buffer_size));
  }
  stages_.push_back({StageKind::kShuffle, buffer_size, 0, seed, reshuffle_each_iteration});
  return Status::Ok();
}

Status Pipeline::Batch(std::int64_t batch_size, bool drop_remainder) {
  if (batched_) {
    return Status::InvalidArgument("batch: the pipeline is already batched (" + Describe() + ")");
  }
  if (batch_size < 1) {
    return Status::InvalidArgument("batch_size must be at least 1, got " + std::to_string(batch_size));
  }
  stages_.push_back({StageKind::kBatch, batch_size, 0, 0, drop_remainder});
  batched_ = true;
  return Status::Ok();
}

Status Pipeline::Repeat(std::int64_t count) {
  if (count < 1) {
    return Status::InvalidArgument("repeat count must be at least 1, got " + std::to_string(count));
  }
  stages_.push_back({StageKind::kRepeat, count, 0, 0, false});
  return Status::Ok();
}

Status Pipeline::Take(std::int64_t count) {
  if (count < 0) {
    return Status::InvalidArgument("take count must be at least 0, got " + std::to_string(count));
  }
  stages_.push_back({StageKind::kTake, count, 0, 0, false});
  return Status::Ok();
}

Status Pipeline::Shard(std::int64_t num_shards, std::int64_t index) {
  if (num_shards < 1) {
    return Status::InvalidArgument("shard num_shards must be at least 1, got " + std::to_string(num_shards));
  }
  if (index < 0 || index >= num_shards) {
    return Status::InvalidArgument("shard index must be in [0, " + std::to_string(num_shards) + "), got " +
                                   std::to_string(index));
  }
  stages_.push_back({StageKind::kShard, num_shards, index, 0, false});
  return Status::Ok();
}

Pipeline::Stream Pipeline::Run(std::size_t num_stages, std::uint64_t iteration) const {
  if (num_stages == 0) {
    Stream source;
    source.values.resize(static_cast<std::size_t>(num_elements_));
    for (std::int64_t i = 0; i < num_elements_; ++i) source.values[i] = i;
    return source;
  }
  const std::size_t stage_number = num_stages - 1;
  const Stage& stage = stages_[stage_number];
  if (stage.kind == StageKind::kRepeat) {
    const auto count = static_cast<std::uint64_t>(stage.size);
    Stream result = Run(stage_number, iteration * count);
    for (std::uint64_t r = 1; r < count; ++r) result.Append(Run(stage_number, iteration * count + r));
    return result;
  }
  Stream input = Run(stage_number, iteration);
  switch (stage.kind) {
    case StageKind::kShuffle: {
      const std::uint64_t effective_iteration = stage.flag ? iteration : 0;
      CounterRng rng(stage.seed, RngPurpose::kShuffle,
                     (static_cast<std::uint64_t>(stage_number) << 32) + effective_iteration);
      return input.Select(ShuffledPositions(input.num_items(), stage.size, rng));
    }
    case StageKind::kBatch:
      input.Batch(stage.size, stage.flag);
      return input;
    case StageKind::kTake:
      input.Truncate(stage.size);
      return input;
    case StageKind::kShard: {
      std::vector<std::int64_t> positions;
      const std::int64_t items = input.num_items();
      positions.reserve(static_cast<std::size_t>(items / stage.size + 1));
      for (std::int64_t p = stage.index; p < items; p += stage.size) positions.push_back(p);
      return input.Select(positions);
    }
    case StageKind::kRepeat:
      break;  // handled above
  }
  return input;
}

std::vector<std::vector<std::int64_t>> Pipeline::Iterate(std::int64_t iteration) const {
  const Stream stream = Run(stages_.size(), static_cast<std::uint64_t>(std::max<std::int64_t>(iteration, 0)));
  std::vector<std::vector<std::int64_t>> items;
  items.reserve(static_cast<std::size_t>(stream.num_items()));
  if (stream.unit_items()) {
    for (const std::int64_t value : stream.values) items.push_back({value});
    return items;
  }
  for (std::size_t i = 0; i + 1 < stream.item_starts.size(); ++i) {
    items.emplace_back(stream.values.begin() + stream.item_starts[i],
                       stream.values.begin() + stream.item_starts[i + 1]);
  }
  return items;
}

std::string Pipeline::Describe() const {
  std::string text = "range(" + std::to_string(num_elements_) + ")";
  for (const Stage& stage : stages_) {
    switch (stage.kind) {
      case StageKind::kShuffle:
        text += ".shuffle(" + std::to_string(stage.size) + ", seed=" + std::to_string(stage.seed) +
                (stage.flag ? "" : ", reshuffle_each_iteration=false") + ")";
        break;
      case StageKind::kBatch:
        text += ".batch(" + std::to_string(stage.size) + (stage.flag ? ", drop_remainder=true" : "") + ")";
        break;
      case StageKind::kRepeat:
        text += ".repeat(" + std::to_string(stage.size) + ")";
        break;
      case StageKind::kTake:
        text += ".take(" + std::to_string(stage.size) + ")";
        break;
      case StageKind::kShard:
        text += ".shard(" + std::to_string(stage.size) + ", " + std::to_string(stage.index) + ")";
        break;
    }
  }
  return text;
}

}  // namespace dtlab
