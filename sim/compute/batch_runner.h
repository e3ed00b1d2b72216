// BatchRunner: runs a model's forward and backward passes over one step's examples
// on oneTBB, split into segments (one per replica) and chunks.
//
// Each segment (a replica's share of the step) is cut into chunks of `chunk_size`
// examples, the last one shorter if the segment is. Every chunk runs single-threaded
// as one task, on its own examples only: a short chunk is not padded, so a replica
// of one example computes one row, not `chunk_size`. Every output of the layers'
// kernels is one fixed-order chain over its own row (core/ordered_gemm.h), so an
// example's forward and backward values do not depend on how many rows its chunk
// has, nor on which chunk, segment or position it lands in
// (tests/unit/batch_runner_test.cc checks this bit for bit): a replica and the
// one-device reference compute identical per-example values, and differ only in the
// order of the sums over examples. A segment's gradient is the sum of its chunks'
// partial gradients in chunk order. Nothing depends on the thread count, so results
// are bit-identical for 1, 2 or 64 threads (docs/architecture.md, "Replicas are not threads").
//
// Thread safety: one BatchRunner per concurrent caller; it owns its scratch memory.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include <tbb/enumerable_thread_specific.h>

#include "core/batch_norm.h"
#include "core/dropout.h"
#include "core/exact_sum.h"
#include "core/model.h"
#include "sim/compute/example_sums.h"

namespace dtlab {

/// One replica's share of a step: examples [begin, begin + count) of the batch.
struct BatchSegment {
  const ParameterList<float>* params = nullptr;  // this replica's copy of the variables
  std::int64_t begin = 0, count = 0;
  ParameterList<float>* grads = nullptr;       // overwritten (zero if count == 0); null: forward only
  ParameterList<float>* magnitudes = nullptr;  // optional: sum of |terms| of each gradient element
};

/// Exact mode (docs/exact.md): one replica's share of a step, whose gradient is
/// kept as exact accumulators.
struct ExactSegment {
  const ParameterList<float>* params = nullptr;  // this replica's copy of the variables
  std::int64_t begin = 0, count = 0;
  /// kExactWords int64 words per parameter value, in parameter order (element k of
  /// the flat parameter vector at k * kExactWords), overwritten with the normalized
  /// exact sum over the segment's examples of coefficients[i] * d loss_i / d params.
  /// Empty: forward only.
  std::span<std::int64_t> grad_words;
  /// Nonzero: grad_words also get the regularization terms with this scale, as
  /// AddRegularizationWords(model, *params, regularization, grad_words) adds them
  /// (the same words), while each element's words are still in cache.
  float regularization = 0.0f;
  /// Non-empty (one float per parameter value, in grad_words' order): the segment's
  /// gradient, rounded from its exact sum as RoundWords rounds the words, goes here;
  /// grad_words are then scratch, holding the sum only where the rounded value is
  /// not finite (enough to name the non-finite terms; SumOutput::rounded). For a
  /// caller whose gradient is this one segment's (one replica, the one-device
  /// reference): most sums are rounded from the double bins, without their words.
  std::span<float> rounded = {};
};

/// What a training step's Dropout layers key their masks by (core/dropout.h): the
/// run's seed, the step, and the rule that gives each example its stream. A step's
/// forward passes with gradients are training passes; the others (evaluation) are
/// inference, where Dropout is the identity.
struct DropoutStep {
  std::uint64_t seed = 0;
  std::int64_t step = 0;
  DropoutRng rng = DropoutRng::kKeyed;
  std::int32_t first_replica = 0;  // kPerReplica: segment s is replica first_replica + s
  /// kKeyed: the data set index of every example of the batch, in the batch's order,
  /// so that an example draws the same mask wherever it lands (another replica, the
  /// one-device reference, a micro-batch of an accumulated step); empty: its position
  /// in the batch. Not owned; valid while the batch runs.
  std::span<const std::int64_t> example_ids;

  /// The mask stream (core/dropout.h) of example `index` of the batch, at position
  /// `position` of segment `segment`: what the CPU's layers and the device backends
  /// both key an example's masks with.
  std::uint64_t StreamOf(std::size_t segment, std::int64_t index, std::int64_t position) const {
    return DropoutStream(rng, example_ids.empty() ? index : example_ids[static_cast<std::size_t>(index)],
                         static_cast<std::int32_t>(first_replica + static_cast<std::int64_t>(segment)), position);
  }
};

/// Exact mode: adds the regularization gradient terms, scale * l2 * (2 * w) per
/// element of every regularized parameter (its own l2), computed in float as
/// Sequential::AddRegularizationGradient does,
/// to gradient words laid out as ExactSegment::grad_words. Normalized words stay
/// normalized (ExactAddFloatNormalized), so that rounding them takes the fast path.
void AddRegularizationWords(const Sequential<float>& model, const ParameterList<float>& weights, float scale,
                            std::span<std::int64_t> words);

/// out[i] = ExactToFloat(element i of `words`), in parallel over blocks of elements.
void RoundWords(std::span<const std::int64_t> words, std::span<float> out);

class BatchRunner {
 public:
  /// Examples per task. 16 keeps a chunk's im2col matrix of seed-cnn near the L2 cache size.
  static constexpr std::int64_t kDefaultChunkSize = 16;

  explicit BatchRunner(const Sequential<float>& model, std::int64_t chunk_size = kDefaultChunkSize);

  /// Runs every segment. For each example i of the batch, writes per_example_loss[i]
  /// and predictions[i] (argmax); for each segment with `grads`, writes
  ///   grads = sum over its examples of coefficients[i] * d loss_i / d params
  /// (the data part of the gradient; regularization is the caller's).
  /// `images` is [B, ...]; labels, coefficients (may be empty when no segment has
  /// grads), per_example_loss and predictions have B entries.
  void Run(const Tensor<float>& images, std::span<const std::int32_t> labels, std::span<const float> coefficients,
           std::span<float> per_example_loss, std::span<std::int32_t> predictions,
           std::span<const BatchSegment> segments);

  /// One segment covering the whole batch, forward only (exact mode: RunExact's forward).
  void Evaluate(const ParameterList<float>& params, const Tensor<float>& images, std::span<const std::int32_t> labels,
                std::span<float> per_example_loss, std::span<std::int32_t> predictions,
                MathMode mode = MathMode::kFast);

  /// One segment covering the whole batch, forward and backward.
  void ForwardBackward(const ParameterList<float>& params, const Tensor<float>& images,
                       std::span<const std::int32_t> labels, std::span<const float> coefficients,
                       std::span<float> per_example_loss, std::span<std::int32_t> predictions,
                       ParameterList<float>& grads);

  /// Exact mode: the same step with ordered kernels, portable elementwise math and
  /// exact sums over examples. Per-example losses and predictions are the same bits
  /// whatever the segments and the chunk size; each segment's gradient words are
  /// the exact sum of its examples' terms, so merging the words of any partition of
  /// the examples (integer addition) gives the words of the whole batch.
  void RunExact(const Tensor<float>& images, std::span<const std::int32_t> labels, std::span<const float> coefficients,
                std::span<float> per_example_loss, std::span<std::int32_t> predictions,
                std::span<const ExactSegment> segments);

  /// Exact mode on one device: the gradient of
  ///   sum_i coefficients[i] * loss_i + l2 * sum(kernel^2)
  /// over the whole batch, every sum exact and rounded once, into `grads`; returns
  /// that loss (rounded once). `words` is scratch.
  float ExactGradient(const ParameterList<float>& params, const Tensor<float>& images,
                      std::span<const std::int32_t> labels, std::span<const float> coefficients,
                      std::span<float> per_example_loss, std::span<std::int32_t> predictions,
                      std::vector<std::int64_t>& words, ParameterList<float>& grads);

  std::int64_t chunk_size() const { return chunk_size_; }

  /// BatchNormalization (core/batch_norm.h). A model with such layers runs a
  /// training pass in stages: every chunk runs up to a BatchNormalization layer, the
  /// chunks' exact partial sums are added up per segment, and, for a synchronized
  /// layer, summed across segments by `reduce` (the cluster's all-reduce; without
  /// one, by adding the segments' words here), before any chunk goes on; the
  /// backward pass stops there again for the sums through the statistics. `reduce`
  /// gets one buffer per segment, all the same size, to be replaced by their
  /// element-wise sum (int64 words, so any order gives the same sum).
  using BatchNormReduce = std::function<void(std::span<const std::span<std::int64_t>> buffers)>;
  void set_batch_norm_reduce(BatchNormReduce reduce) { batch_norm_reduce_ = std::move(reduce); }
  /// True if the model has a BatchNormalization layer (its training passes are staged).
  bool has_batch_norm() const { return !batch_norm_layers_.empty(); }
  /// After a training Run or RunExact: segment `segment`'s statistics, indexed by
  /// layer (ForwardContext::batch_norm); empty if the model has no BatchNormalization
  /// layer or the last pass trained nothing.
  std::span<const BatchNormStatistics> batch_norm_statistics(std::size_t segment) const {
    return segment < batch_norm_stats_.size() ? std::span<const BatchNormStatistics>(batch_norm_stats_[segment])
                                              : std::span<const BatchNormStatistics>();
  }
  /// The step the next Run or RunExact is (for Dropout's masks); the images' rows
  /// are the step's global batch, so an example's position there is its stream.
  void set_dropout_step(const DropoutStep& step) { dropout_step_ = step; }

 private:
  struct ThreadScratch {
    Sequential<float>::Workspace workspace;
    Tensor<float> chunk_images, dlogits;
    std::vector<std::int32_t> chunk_labels, chunk_predictions;
    std::vector<float> chunk_coefficients, chunk_losses;
  };
  struct ChunkTask {
    std::size_t segment;
    std::int64_t begin, count;  // examples of the batch
    std::size_t slot;           // index into chunk_grads_ (if the segment has several chunks)
    bool direct;                // the segment's only chunk: writes straight into its grads
  };
  ParameterList<float>& ChunkBuffer(std::vector<ParameterList<float>>& pool, std::size_t slot);
  // Copies chunk `task` of the batch (its `count` examples, no padding) into the scratch's buffers.
  void LoadChunk(const Tensor<float>& images, std::span<const std::int32_t> labels, std::span<const float> coefficients,
                 std::int64_t begin, std::int64_t count, ThreadScratch& scratch) const;
  // The chunk's ForwardContext: a training pass or not, and each example's stream
  // (its segment is replica first_replica + segment, starting at segment_begin).
  void SetForwardContext(bool training, std::size_t segment, std::int64_t segment_begin, std::int64_t begin,
                         std::int64_t count, ThreadScratch& scratch) const;

  // One chunk of a staged pass (a model with BatchNormalization): its segment, its
  // examples, and whether it trains (a backward pass into `grads` or `terms`).
  struct StagedChunk {
    std::size_t segment;
    std::int64_t segment_begin, begin, count;
    const ParameterList<float>* params;
    bool backward;
    ParameterList<float>* grads = nullptr;  // fast mode
    ParameterList<float>* magnitudes = nullptr;
    std::vector<ExampleTerms>* terms = nullptr;  // exact mode
  };
  // The chunks' passes in stages at every BatchNormalization layer (set_batch_norm_reduce).
  void RunStaged(const Tensor<float>& images, std::span<const std::int32_t> labels, std::span<const float> coefficients,
                 std::span<float> per_example_loss, std::span<std::int32_t> predictions,
                 std::span<const StagedChunk> chunks, std::size_t segments, bool exact);
  // Adds each training chunk's partial sums (forward or backward) of layer `layer`
  // per segment, reduces them across segments if the layer is synchronized, and
  // finishes the segments' statistics.
  void SumStatistics(std::span<const StagedChunk> chunks, std::size_t segments, std::size_t layer, bool backward);

  const Sequential<float>& model_;
  std::int64_t chunk_size_;
  std::vector<std::size_t> batch_norm_layers_;
  BatchNormReduce batch_norm_reduce_;
  std::vector<std::vector<BatchNormStatistics>> batch_norm_stats_;  // [segment][layer]
  std::vector<ThreadScratch> staged_scratch_;                       // [chunk] of a staged pass
  std::vector<Tensor<float>*> staged_dy_;                           // [chunk]: where its backward pass is
  std::vector<std::vector<std::int64_t>> chunk_words_, segment_words_;
  DropoutStep dropout_step_;
  tbb::enumerable_thread_specific<ThreadScratch> scratch_;
  tbb::enumerable_thread_specific<OuterProductScratch> scratch_sums_;
  std::vector<float> rounded_;                                        // ExactGradient's rounded gradient
  std::vector<ParameterList<float>> chunk_grads_, chunk_magnitudes_;  // [slot][parameter]
  std::vector<std::vector<ExampleTerms>> chunk_terms_;                // exact mode: [slot][parameter]
};

}  // namespace dtlab
