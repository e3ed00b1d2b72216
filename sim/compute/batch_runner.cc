#include "sim/compute/batch_runner.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/loss.h"
#include "sim/compute/example_sums.h"

namespace dtlab {

BatchRunner::BatchRunner(const Sequential<float>& model, std::int64_t chunk_size)
    : model_(model), chunk_size_(std::max<std::int64_t>(chunk_size, 1)), batch_norm_layers_(BatchNormLayers(model)) {}

void BatchRunner::Evaluate(const ParameterList<float>& params, const Tensor<float>& images,
                           std::span<const std::int32_t> labels, std::span<float> per_example_loss,
                           std::span<std::int32_t> predictions, MathMode mode) {
  if (mode == MathMode::kExact) {
    const ExactSegment segment{&params, 0, static_cast<std::int64_t>(labels.size()), {}, 0.0f, {}};
    RunExact(images, labels, {}, per_example_loss, predictions, std::span(&segment, 1));
    return;
  }
  const BatchSegment segment{&params, 0, static_cast<std::int64_t>(labels.size()), nullptr, nullptr};
  Run(images, labels, {}, per_example_loss, predictions, std::span(&segment, 1));
}

void BatchRunner::ForwardBackward(const ParameterList<float>& params, const Tensor<float>& images,
                                  std::span<const std::int32_t> labels, std::span<const float> coefficients,
                                  std::span<float> per_example_loss, std::span<std::int32_t> predictions,
                                  ParameterList<float>& grads) {
  const BatchSegment segment{&params, 0, static_cast<std::int64_t>(labels.size()), &grads, nullptr};
  Run(images, labels, coefficients, per_example_loss, predictions, std::span(&segment, 1));
}

void BatchRunner::LoadChunk(const Tensor<float>& images, std::span<const std::int32_t> labels,
                            std::span<const float> coefficients, std::int64_t begin, std::int64_t count,
                            ThreadScratch& scratch) const {
  const std::int64_t batch = static_cast<std::int64_t>(labels.size());
  const std::int64_t example_size = batch == 0 ? 0 : images.size() / batch;
  const auto n = static_cast<std::size_t>(count);
  Shape chunk_shape = images.shape();
  chunk_shape[0] = count;
  scratch.chunk_images.Resize(chunk_shape);
  std::memcpy(scratch.chunk_images.data(), images.data() + begin * example_size,
              sizeof(float) * n * static_cast<std::size_t>(example_size));
  scratch.chunk_labels.assign(labels.begin() + begin, labels.begin() + begin + count);
  scratch.chunk_losses.resize(n);
  scratch.chunk_predictions.resize(n);
  if (coefficients.empty())
    scratch.chunk_coefficients.assign(n, 0.0f);
  else
    scratch.chunk_coefficients.assign(coefficients.begin() + begin, coefficients.begin() + begin + count);
}

void BatchRunner::SetForwardContext(bool training, std::size_t segment, std::int64_t segment_begin, std::int64_t begin,
                                    std::int64_t count, ThreadScratch& scratch) const {
  Sequential<float>::Workspace& ws = scratch.workspace;
  ws.context.training = training;
  ws.context.seed = dropout_step_.seed;
  ws.context.step = dropout_step_.step;
  ws.example_streams.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i)
    ws.example_streams[static_cast<std::size_t>(i)] =
        dropout_step_.StreamOf(segment, begin + i, begin + i - segment_begin);
  ws.context.example_streams = ws.example_streams;
}

ParameterList<float>& BatchRunner::ChunkBuffer(std::vector<ParameterList<float>>& pool, std::size_t slot) {
  while (pool.size() <= slot) pool.push_back(model_.ZeroParameters());
  return pool[slot];
}

void BatchRunner::Run(const Tensor<float>& images, std::span<const std::int32_t> labels,
                      std::span<const float> coefficients, std::span<float> per_example_loss,
                      std::span<std::int32_t> predictions, std::span<const BatchSegment> segments) {
  // The task list depends only on the segments and the chunk size.
  std::vector<ChunkTask> tasks;
  std::size_t slots = 0;
  bool any_magnitudes = false;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    const BatchSegment& seg = segments[s];
    const std::int64_t chunks = (seg.count + chunk_size_ - 1) / chunk_size_;
    any_magnitudes |= seg.magnitudes != nullptr;
    if (seg.grads && chunks == 0) {
      for (auto& g : *seg.grads) g.SetZero();
      if (seg.magnitudes)
        for (auto& m : *seg.magnitudes) m.SetZero();
    }
    for (std::int64_t c = 0; c < chunks; ++c) {
      const bool direct = chunks == 1;
      tasks.push_back({s, seg.begin + c * chunk_size_, std::min(chunk_size_, seg.count - c * chunk_size_),
                       direct ? 0 : slots, direct});
      if (!direct && seg.grads) ++slots;
    }
  }
  for (std::size_t slot = 0; slot < slots; ++slot) {
    ChunkBuffer(chunk_grads_, slot);
    if (any_magnitudes) ChunkBuffer(chunk_magnitudes_, slot);
  }

  batch_norm_stats_.clear();
  const bool staged = !batch_norm_layers_.empty() &&
                      std::any_of(segments.begin(), segments.end(), [](const BatchSegment& s) { return s.grads; });
  if (staged) {
    std::vector<StagedChunk> staged_chunks;
    for (const ChunkTask& task : tasks) {
      const BatchSegment& seg = segments[task.segment];
      StagedChunk chunk{task.segment, seg.begin, task.begin, task.count, seg.params, seg.grads != nullptr};
      if (seg.grads) {
        chunk.grads = task.direct ? seg.grads : &chunk_grads_[task.slot];
        chunk.magnitudes = seg.magnitudes ? (task.direct ? seg.magnitudes : &chunk_magnitudes_[task.slot]) : nullptr;
      }
      staged_chunks.push_back(chunk);
    }
    RunStaged(images, labels, coefficients, per_example_loss, predictions, staged_chunks, segments.size(), false);
  }
  tbb::parallel_for(
      tbb::blocked_range<std::size_t>(0, staged ? 0 : tasks.size(), 1),
      [&](const tbb::blocked_range<std::size_t>& range) {
        ThreadScratch& scratch = scratch_.local();
        for (std::size_t t = range.begin(); t < range.end(); ++t) {
          const ChunkTask& task = tasks[t];
          const BatchSegment& seg = segments[task.segment];
          const auto first = static_cast<std::size_t>(task.begin), n = static_cast<std::size_t>(task.count);
          LoadChunk(images, labels, seg.grads ? coefficients : std::span<const float>(), task.begin, task.count,
                    scratch);
          SetForwardContext(seg.grads != nullptr, task.segment, seg.begin, task.begin, task.count, scratch);
          const Tensor<float>& logits = model_.Forward(*seg.params, scratch.chunk_images, scratch.workspace);
          ArgmaxRows(logits, scratch.chunk_predictions);
          if (!seg.grads) {
            SparseCategoricalCrossentropyFromLogits<float>(logits, scratch.chunk_labels, scratch.chunk_losses, {},
                                                           nullptr);
          } else {
            SparseCategoricalCrossentropyFromLogits<float>(logits, scratch.chunk_labels, scratch.chunk_losses,
                                                           scratch.chunk_coefficients, &scratch.dlogits);
            ParameterList<float>& grads = task.direct ? *seg.grads : chunk_grads_[task.slot];
            ParameterList<float>* magnitudes =
                seg.magnitudes ? (task.direct ? seg.magnitudes : &chunk_magnitudes_[task.slot]) : nullptr;
            model_.Backward(*seg.params, scratch.dlogits, scratch.workspace, grads, magnitudes);
          }
          std::copy_n(scratch.chunk_losses.begin(), n, per_example_loss.begin() + first);
          std::copy_n(scratch.chunk_predictions.begin(), n, predictions.begin() + first);
        }
      },
      tbb::simple_partitioner());

  // Each segment's gradient: the sum of its chunks' partial gradients in chunk order.
  std::size_t first_slot = 0;
  for (const BatchSegment& seg : segments) {
    const std::int64_t chunks = (seg.count + chunk_size_ - 1) / chunk_size_;
    if (!seg.grads || chunks <= 1) continue;
    auto sum_chunks = [&](std::vector<ParameterList<float>>& pool, ParameterList<float>& out) {
      for (std::size_t p = 0; p < out.size(); ++p) {
        float* dst = out[p].data();
        tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, out[p].size(), 4096),
                          [&](const tbb::blocked_range<std::int64_t>& r) {
                            for (std::int64_t i = r.begin(); i < r.end(); ++i) {
                              float sum = pool[first_slot][p][i];
                              for (std::int64_t c = 1; c < chunks; ++c)
                                sum += pool[first_slot + static_cast<std::size_t>(c)][p][i];
                              dst[i] = sum;
                            }
                          });
      }
    };
    sum_chunks(chunk_grads_, *seg.grads);
    if (seg.magnitudes) sum_chunks(chunk_magnitudes_, *seg.magnitudes);
    first_slot += static_cast<std::size_t>(chunks);
  }
}

void BatchRunner::RunExact(const Tensor<float>& images, std::span<const std::int32_t> labels,
                           std::span<const float> coefficients, std::span<float> per_example_loss,
                           std::span<std::int32_t> predictions, std::span<const ExactSegment> segments) {
  // Phase 1: every chunk's forward and backward pass, keeping its per-example
  // gradient terms (one slot of chunk_terms_ per chunk of a segment with gradients).
  struct ExactChunk {
    std::size_t segment;
    std::int64_t begin, count;
    std::size_t slot;
  };
  std::vector<ExactChunk> chunks;
  std::vector<std::vector<std::size_t>> segment_chunks(segments.size());  // indices into `chunks`
  std::size_t slots = 0;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    const ExactSegment& seg = segments[s];
    for (std::int64_t c = 0; c * chunk_size_ < seg.count; ++c) {
      segment_chunks[s].push_back(chunks.size());
      chunks.push_back({s, seg.begin + c * chunk_size_, std::min(chunk_size_, seg.count - c * chunk_size_),
                        seg.grad_words.empty() ? 0 : slots++});
    }
  }
  if (chunk_terms_.size() < slots) chunk_terms_.resize(slots);
  batch_norm_stats_.clear();
  const bool staged = !batch_norm_layers_.empty() && std::any_of(segments.begin(), segments.end(),
                                                                 [](const auto& s) { return !s.grad_words.empty(); });
  if (staged) {
    std::vector<StagedChunk> staged_chunks;
    for (const ExactChunk& chunk : chunks) {
      const ExactSegment& seg = segments[chunk.segment];
      StagedChunk staged_chunk{chunk.segment, seg.begin, chunk.begin, chunk.count, seg.params, !seg.grad_words.empty()};
      if (staged_chunk.backward) staged_chunk.terms = &chunk_terms_[chunk.slot];
      staged_chunks.push_back(staged_chunk);
    }
    RunStaged(images, labels, coefficients, per_example_loss, predictions, staged_chunks, segments.size(), true);
  }
  tbb::parallel_for(
      tbb::blocked_range<std::size_t>(0, staged ? 0 : chunks.size(), 1),
      [&](const tbb::blocked_range<std::size_t>& range) {
        ThreadScratch& scratch = scratch_.local();
        for (std::size_t t = range.begin(); t < range.end(); ++t) {
          const ExactChunk& chunk = chunks[t];
          const ExactSegment& seg = segments[chunk.segment];
          const bool backward = !seg.grad_words.empty();
          LoadChunk(images, labels, backward ? coefficients : std::span<const float>(), chunk.begin, chunk.count,
                    scratch);
          SetForwardContext(backward, chunk.segment, seg.begin, chunk.begin, chunk.count, scratch);
          const Tensor<float>& logits = model_.Forward(*seg.params, scratch.chunk_images, scratch.workspace);
          ArgmaxRows(logits, scratch.chunk_predictions);
          SparseCategoricalCrossentropyFromLogits<float>(logits, scratch.chunk_labels, scratch.chunk_losses,
                                                         scratch.chunk_coefficients,
                                                         backward ? &scratch.dlogits : nullptr);
          if (backward) model_.BackwardExact(*seg.params, scratch.dlogits, scratch.workspace, chunk_terms_[chunk.slot]);
          const auto first = static_cast<std::size_t>(chunk.begin), n = static_cast<std::size_t>(chunk.count);
          std::copy_n(scratch.chunk_losses.begin(), n, per_example_loss.begin() + first);
          std::copy_n(scratch.chunk_predictions.begin(), n, predictions.begin() + first);
        }
      },
      tbb::simple_partitioner());

  // Phase 2: each gradient element's exact sum over its segment's examples, taken
  // element by element (so no two tasks write the same words) and stored normalized.
  const auto& specs = model_.parameters();
  std::vector<std::int64_t> offsets(specs.size() + 1, 0);
  for (std::size_t p = 0; p < specs.size(); ++p) offsets[p + 1] = offsets[p] + NumElements(specs[p].spec.shape);
  struct SumTask {
    std::size_t segment, parameter;
    std::int64_t begin, end;  // elements, or rows i for outer products
  };
  std::vector<SumTask> sum_tasks;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    const ExactSegment& seg = segments[s];
    if (seg.grad_words.empty()) continue;
    if (segment_chunks[s].empty()) {
      std::fill(seg.grad_words.begin(), seg.grad_words.end(), 0);
      if (seg.regularization != 0.0f) AddRegularizationWords(model_, *seg.params, seg.regularization, seg.grad_words);
      if (!seg.rounded.empty()) RoundWords(seg.grad_words, seg.rounded);
      continue;
    }
    const std::vector<ExampleTerms>& terms = chunk_terms_[chunks[segment_chunks[s].front()].slot];
    for (std::size_t p = 0; p < specs.size(); ++p) {
      const bool outer = terms[p].kind == ExampleTerms::Kind::kOuterProducts;
      const std::int64_t units = outer ? terms[p].a.dim(1) : offsets[p + 1] - offsets[p];
      const std::int64_t block = outer ? 128 : 2048;  // outer: b is decoded once per task
      for (std::int64_t b = 0; b < units; b += block) sum_tasks.push_back({s, p, b, std::min(units, b + block)});
    }
  }
  tbb::parallel_for(
      tbb::blocked_range<std::size_t>(0, sum_tasks.size(), 1), [&](const tbb::blocked_range<std::size_t>& range) {
        for (std::size_t t = range.begin(); t < range.end(); ++t) {
          const SumTask& task = sum_tasks[t];
          const ExactSegment& seg = segments[task.segment];
          const double l2 = specs[task.parameter].spec.l2;
          const SumOutput out{
              seg.grad_words.data() + offsets[task.parameter] * kExactWords,
              seg.regularization != 0.0f && l2 != 0.0 ? seg.regularization * static_cast<float>(l2) : 0.0f,
              (*seg.params)[task.parameter].data(),
              seg.rounded.empty() ? nullptr : seg.rounded.data() + offsets[task.parameter]};
          const auto& mine = segment_chunks[task.segment];
          const ExampleTerms& first = chunk_terms_[chunks[mine.front()].slot][task.parameter];
          std::vector<const ExampleTerms*> terms;
          std::vector<std::int64_t> counts;
          for (const std::size_t c : mine) {
            terms.push_back(&chunk_terms_[chunks[c].slot][task.parameter]);
            counts.push_back(chunks[c].count);
          }
          // The task's elements: [begin, end), or rows [begin, end) of J.
          if (first.kind == ExampleTerms::Kind::kValues)
            SumValues(terms, counts, task.begin, task.end, out);
          else
            SumOuterProducts(terms, counts, task.begin, task.end, out, scratch_sums_.local());
        }
      });
}

void RoundWords(std::span<const std::int64_t> words, std::span<float> out) {
  tbb::parallel_for(
      tbb::blocked_range<std::size_t>(0, out.size(), 4096), [&](const tbb::blocked_range<std::size_t>& r) {
        ExactToFloats(words.subspan(r.begin() * kExactWords, r.size() * kExactWords), out.subspan(r.begin(), r.size()));
      });
}

namespace {
// AddRegularizationWords for elements [begin, end) of one parameter: words (element
// k's at words + k * kExactWords) += scale * l2 * (2 * w[k]).
void AddRegularizationTerms(std::span<const float> w, float scale, double l2, std::int64_t begin, std::int64_t end,
                            std::int64_t* words) {
  if (l2 == 0.0) return;
  const float coefficient = scale * static_cast<float>(l2);
  for (std::int64_t k = begin; k < end; ++k)
    ExactAddFloatNormalized(words + k * kExactWords, RegularizationTerm(coefficient, w[static_cast<std::size_t>(k)]));
}
}  // namespace

void AddRegularizationWords(const Sequential<float>& model, const ParameterList<float>& weights, float scale,
                            std::span<std::int64_t> words) {
  std::int64_t offset = 0;
  for (std::size_t p = 0; p < weights.size(); ++p) {
    const std::int64_t size = weights[p].size();
    const double l2 = model.parameters()[p].spec.l2;
    std::int64_t* first = words.data() + offset * kExactWords;
    if (l2 != 0.0)
      tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, size, 8192),
                        [&](const tbb::blocked_range<std::int64_t>& r) {
                          AddRegularizationTerms(weights[p].span(), scale, l2, r.begin(), r.end(), first);
                        });
    offset += size;
  }
}

float BatchRunner::ExactGradient(const ParameterList<float>& params, const Tensor<float>& images,
                                 std::span<const std::int32_t> labels, std::span<const float> coefficients,
                                 std::span<float> per_example_loss, std::span<std::int32_t> predictions,
                                 std::vector<std::int64_t>& words, ParameterList<float>& grads) {
  // The words are scratch: RunExact rounds the gradient into `rounded`.
  words.resize(static_cast<std::size_t>(model_.num_parameter_values() * kExactWords));
  rounded_.resize(static_cast<std::size_t>(model_.num_parameter_values()));
  const ExactSegment whole{&params, 0, static_cast<std::int64_t>(labels.size()), words, 1.0f, rounded_};
  RunExact(images, labels, coefficients, per_example_loss, predictions, std::span(&whole, 1));
  std::size_t offset = 0;
  for (auto& g : grads) {
    std::copy_n(rounded_.begin() + static_cast<std::ptrdiff_t>(offset), g.size(), g.data());
    offset += static_cast<std::size_t>(g.size());
  }
  ExactSum loss;
  for (std::size_t i = 0; i < labels.size(); ++i) loss.AddProduct(coefficients[i], per_example_loss[i]);
  loss.Add(model_.RegularizationLoss(params));
  return loss.ToFloat();
}

}  // namespace dtlab
