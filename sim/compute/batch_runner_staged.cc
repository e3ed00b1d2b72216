// BatchRunner's staged pass: a training step of a model with BatchNormalization
// layers (core/batch_norm.h), whose statistics couple the examples of a batch.
//
// Every chunk keeps its own workspace for the whole pass. The forward pass runs all
// chunks up to the first BatchNormalization layer, adds up the chunks' partial
// sums of that layer's input per segment (and across segments for a synchronized
// layer), and goes on to the next one; the backward pass stops at each of them again
// for the sums through the statistics. The sums over examples are exact (each
// example's own sum is a function of the example), so the statistics do not depend
// on how the examples are split into chunks or on the thread count.
#include <algorithm>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/exact_sum.h"
#include "core/loss.h"
#include "sim/compute/batch_runner.h"

namespace dtlab {

namespace {

template <typename Body>
void ForEach(std::size_t n, Body body) {
  tbb::parallel_for(
      tbb::blocked_range<std::size_t>(0, n, 1),
      [&](const tbb::blocked_range<std::size_t>& range) {
        for (std::size_t i = range.begin(); i < range.end(); ++i) body(i);
      },
      tbb::simple_partitioner());
}

}  // namespace

void BatchRunner::SumStatistics(std::span<const StagedChunk> chunks, std::size_t segments, std::size_t layer,
                                bool backward) {
  const auto& bn = static_cast<const BatchNormalization<float>&>(*model_.layers()[layer]);
  const Shape& input = model_.layer_input_shape(layer);  // one example's
  const std::int64_t channels = input.back();
  const std::int64_t positions = NumElements(input) / channels;
  const auto size = static_cast<std::size_t>(BatchNormWords(channels));
  chunk_words_.resize(chunks.size());
  ForEach(chunks.size(), [&](std::size_t c) {
    std::vector<std::int64_t>& words = chunk_words_[c];
    words.assign(size, 0);
    if (!chunks[c].backward) return;
    const Sequential<float>::Workspace& ws = staged_scratch_[c].workspace;
    if (backward)
      AddBackwardSums(ws.activations[layer], *staged_dy_[c], batch_norm_stats_[chunks[c].segment][layer].mean, words);
    else
      AddForwardSums(ws.activations[layer], words);
  });
  segment_words_.resize(segments);
  ForEach(segments, [&](std::size_t s) {
    std::vector<std::int64_t>& words = segment_words_[s];
    words.assign(size, 0);
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      if (chunks[c].segment != s) continue;
      for (std::size_t k = 0; k + 1 < size; k += kExactWords) ExactMerge(words.data() + k, chunk_words_[c].data() + k);
      words.back() += chunk_words_[c].back();
    }
  });
  if (bn.config().synchronized && segments > 0) {
    std::vector<std::span<std::int64_t>> buffers;
    for (auto& words : segment_words_) buffers.emplace_back(words);
    if (batch_norm_reduce_) {
      batch_norm_reduce_(buffers);
    } else {
      for (std::size_t s = 1; s < segments; ++s)
        for (std::size_t k = 0; k < size; ++k) segment_words_[0][k] += segment_words_[s][k];
      for (std::size_t s = 1; s < segments; ++s) segment_words_[s] = segment_words_[0];
    }
  }
  ForEach(segments, [&](std::size_t s) {
    BatchNormStatistics& stats = batch_norm_stats_[s][layer];
    if (backward)
      FinishBackwardSums(segment_words_[s], positions, bn.config().epsilon, stats);
    else
      FinishForwardSums(segment_words_[s], positions, stats);
  });
}

void BatchRunner::RunStaged(const Tensor<float>& images, std::span<const std::int32_t> labels,
                            std::span<const float> coefficients, std::span<float> per_example_loss,
                            std::span<std::int32_t> predictions, std::span<const StagedChunk> chunks,
                            std::size_t segments, bool exact) {
  const std::size_t layers = model_.layers().size();
  batch_norm_stats_.assign(segments, std::vector<BatchNormStatistics>(layers));
  if (staged_scratch_.size() < chunks.size()) staged_scratch_.resize(chunks.size());
  staged_dy_.assign(chunks.size(), nullptr);

  ForEach(chunks.size(), [&](std::size_t c) {
    const StagedChunk& chunk = chunks[c];
    ThreadScratch& scratch = staged_scratch_[c];
    LoadChunk(images, labels, chunk.backward ? coefficients : std::span<const float>(), chunk.begin, chunk.count,
              scratch);
    SetForwardContext(chunk.backward, chunk.segment, chunk.segment_begin, chunk.begin, chunk.count, scratch);
    scratch.workspace.context.batch_norm = batch_norm_stats_[chunk.segment];
    model_.ForwardBegin(*chunk.params, scratch.chunk_images, scratch.workspace);
  });
  // Forward: up to each BatchNormalization layer, then its statistics.
  std::size_t from = 0;
  for (const std::size_t layer : batch_norm_layers_) {
    ForEach(chunks.size(),
            [&](std::size_t c) { model_.ForwardLayers(*chunks[c].params, from, layer, staged_scratch_[c].workspace); });
    SumStatistics(chunks, segments, layer, false);
    from = layer;
  }
  // The rest of the forward pass, the loss, and the backward pass down to the last
  // BatchNormalization layer's output.
  const std::size_t last = batch_norm_layers_.back() + 1;
  ForEach(chunks.size(), [&](std::size_t c) {
    const StagedChunk& chunk = chunks[c];
    ThreadScratch& scratch = staged_scratch_[c];
    model_.ForwardLayers(*chunk.params, from, layers, scratch.workspace);
    const Tensor<float>& logits = scratch.workspace.activations.back();
    ArgmaxRows(logits, scratch.chunk_predictions);
    if (!chunk.backward && !exact) {
      SparseCategoricalCrossentropyFromLogits<float>(logits, scratch.chunk_labels, scratch.chunk_losses, {}, nullptr);
    } else {
      SparseCategoricalCrossentropyFromLogits<float>(logits, scratch.chunk_labels, scratch.chunk_losses,
                                                     scratch.chunk_coefficients,
                                                     chunk.backward ? &scratch.dlogits : nullptr);
    }
    const auto first = static_cast<std::size_t>(chunk.begin), n = static_cast<std::size_t>(chunk.count);
    std::copy_n(scratch.chunk_losses.begin(), n, per_example_loss.begin() + first);
    std::copy_n(scratch.chunk_predictions.begin(), n, predictions.begin() + first);
  });
  auto backward = [&](std::size_t top, std::size_t bottom) {
    ForEach(chunks.size(), [&](std::size_t c) {
      const StagedChunk& chunk = chunks[c];
      if (!chunk.backward) return;
      ThreadScratch& scratch = staged_scratch_[c];
      if (top == layers) staged_dy_[c] = model_.BackwardBegin(scratch.dlogits);
      if (exact)
        model_.BackwardExactLayers(*chunk.params, top, bottom, staged_dy_[c], scratch.workspace, *chunk.terms);
      else
        model_.BackwardLayers(*chunk.params, top, bottom, staged_dy_[c], scratch.workspace, *chunk.grads,
                              chunk.magnitudes);
    });
  };
  backward(layers, last);
  // Backward: at each BatchNormalization layer, from the last, the sums through its
  // statistics, then down to the one below (or the input).
  for (std::size_t k = batch_norm_layers_.size(); k-- > 0;) {
    const std::size_t layer = batch_norm_layers_[k];
    SumStatistics(chunks, segments, layer, true);
    backward(layer + 1, k == 0 ? 0 : batch_norm_layers_[k - 1] + 1);
  }
}

}  // namespace dtlab
