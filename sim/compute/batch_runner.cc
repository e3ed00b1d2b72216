#include "sim/compute/batch_runner.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/loss.h"

namespace dtlab {

BatchRunner::BatchRunner(const Sequential<float>& model, std::int64_t chunk_size)
    : model_(model), chunk_size_(std::max<std::int64_t>(chunk_size, 1)), batch_norm_layers_(BatchNormLayers(model)) {}

void BatchRunner::Evaluate(const ParameterList<float>& params, const Tensor<float>& images,
                           std::span<const std::int32_t> labels, std::span<float> per_example_loss,
                           std::span<std::int32_t> predictions, MathMode mode) {
  if (mode == MathMode::kExact) {
    const ExactSegment segment{&params, 0, static_cast<std::int64_t>(labels.size()), {}};
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

namespace {

// out[k] = the exact sum over examples of values[e][k], for k in [begin, end), taken
// four elements at a time so that four independent accumulators keep the core busy.
void SumValues(std::span<const ExampleTerms* const> terms, std::span<const std::int64_t> counts, std::int64_t begin,
               std::int64_t end, std::int64_t* out) {
  constexpr std::int64_t kLanes = 4;
  const std::int64_t size = terms[0]->values.dim(1);
  for (std::int64_t k = begin; k < end; k += kLanes) {
    const std::int64_t lanes = std::min(kLanes, end - k);
    std::int64_t acc[kLanes][kExactWords] = {};
    for (std::size_t c = 0; c < terms.size(); ++c) {
      const float* v = terms[c]->values.data() + k;
      for (std::int64_t e = 0; e < counts[c]; ++e, v += size) {
        if (lanes == kLanes) {
          ExactAddFloat(acc[0], v[0]);
          ExactAddFloat(acc[1], v[1]);
          ExactAddFloat(acc[2], v[2]);
          ExactAddFloat(acc[3], v[3]);
        } else {
          for (std::int64_t l = 0; l < lanes; ++l) ExactAddFloat(acc[l], v[l]);
        }
      }
    }
    for (std::int64_t l = 0; l < lanes; ++l) {
      ExactNormalize(acc[l]);
      std::copy_n(acc[l], kExactWords, out + (k + l) * kExactWords);
    }
  }
}

}  // namespace

// Rows [begin, end) of an [I, J] parameter whose element (i, j) is the exact sum of
// a[e][i] * b[e][j] over the segment's examples.
//
// The products are 48-bit integers times powers of two. Element (i, j)'s products
// are at most 2^(Amax_i + Bmax_j) (the largest exponents of a[.][i] and b[.][j]), so
// a 128-bit integer window whose top is that bound plus room for the carries holds
// every product within 78 - H binades of it exactly; the window is added to the
// element's accumulator words once at the end (ExactAddInt128). A product further
// below (rare: a tiny factor beside a large one) goes straight to the words. Either
// way the sum is exact, so the split between the two is invisible in the result.
//
// Each example's b row is first reduced to its nonzero entries: a zero factor adds
// an exact zero, unless the other factor is infinite or NaN (0 * inf is NaN), in
// which case the whole row goes through ExactAddProduct.
void BatchRunner::SumOuterProducts(std::span<const ExampleTerms* const> terms, std::span<const std::int64_t> counts,
                                   std::int64_t begin, std::int64_t end, std::int64_t* out, SumScratch& scratch) {
  using exact_internal::DecodeFiniteFloat;
  const std::int64_t inputs = terms[0]->a.dim(1), units = terms[0]->b.dim(1);
  const auto J = static_cast<std::size_t>(units);
  std::int64_t rows = 0;
  for (const std::int64_t c : counts) rows += c;
  // Headroom: at most `rows` products per element, each below 2^(top - H).
  const int headroom = std::bit_width(static_cast<std::uint64_t>(rows)) + 1;
  const int reach = 126 - 48 - headroom;  // how far below the top a product's lsb may sit

  scratch.nonzero.clear();
  scratch.row_start.clear();
  scratch.row_finite.clear();
  scratch.b_max.assign(J, 0);
  for (std::size_t c = 0; c < terms.size(); ++c)
    for (std::int64_t e = 0; e < counts[c]; ++e) {
      const float* b = terms[c]->b.data() + e * units;
      bool finite = true;
      for (std::int64_t j = 0; j < units; ++j) finite &= std::isfinite(b[j]);
      scratch.row_start.push_back(scratch.nonzero.size());
      scratch.row_finite.push_back(finite);
      for (std::int64_t j = 0; j < units; ++j) {
        if (b[j] == 0.0f) continue;
        const std::uint32_t bits = std::bit_cast<std::uint32_t>(b[j]);
        const auto [significand, exponent] = DecodeFiniteFloat(bits);
        const auto signed_significand = static_cast<std::int32_t>(significand);
        scratch.nonzero.push_back({static_cast<std::int32_t>(j), b[j],
                                   (bits >> 31) ? -signed_significand : signed_significand,
                                   static_cast<std::int32_t>(exponent)});
        if (finite)
          scratch.b_max[static_cast<std::size_t>(j)] =
              std::max(scratch.b_max[static_cast<std::size_t>(j)], static_cast<std::int32_t>(exponent));
      }
    }
  scratch.row_start.push_back(scratch.nonzero.size());
  scratch.window.resize(J);
  scratch.a_significand.resize(static_cast<std::size_t>(rows));
  scratch.a_exponent.resize(static_cast<std::size_t>(rows));
  for (std::int64_t i = begin; i < end; ++i) {
    // Input i's J accumulators, written in place (the caller's words are overwritten).
    const std::span<std::int64_t> words(out + i * units * kExactWords, J * kExactWords);
    std::int64_t* row = words.data();
    std::fill(words.begin(), words.end(), 0);
    std::fill(scratch.window.begin(), scratch.window.end(), 0);
    // a[.][i] decoded, and its largest exponent over the finite nonzero values.
    std::int32_t a_max = 0;
    std::size_t r = 0;
    for (std::size_t c = 0; c < terms.size(); ++c)
      for (std::int64_t e = 0; e < counts[c]; ++e, ++r) {
        const float a = terms[c]->a[e * inputs + i];
        const std::uint32_t bits = std::bit_cast<std::uint32_t>(a);
        const auto [significand, exponent] = DecodeFiniteFloat(bits);
        const auto signed_significand = static_cast<std::int32_t>(significand);
        scratch.a_significand[r] = (bits >> 31) ? -signed_significand : signed_significand;
        scratch.a_exponent[r] = static_cast<std::int32_t>(exponent);
        if (a != 0.0f && std::isfinite(a)) a_max = std::max(a_max, static_cast<std::int32_t>(exponent));
      }
    r = 0;
    for (std::size_t c = 0; c < terms.size(); ++c)
      for (std::int64_t e = 0; e < counts[c]; ++e, ++r) {
        const float a = terms[c]->a[e * inputs + i];
        if (!std::isfinite(a) || !scratch.row_finite[r]) {
          const float* b = terms[c]->b.data() + e * units;
          for (std::int64_t j = 0; j < units; ++j) ExactAddProduct(row + j * kExactWords, a, b[j]);
          continue;
        }
        if (a == 0.0f) continue;
        const std::int64_t sa = scratch.a_significand[r];
        const std::int32_t da = scratch.a_exponent[r] - a_max + reach;
        for (std::size_t n = scratch.row_start[r]; n < scratch.row_start[r + 1]; ++n) {
          const auto& entry = scratch.nonzero[n];
          const auto j = static_cast<std::size_t>(entry.index);
          const std::int32_t shift = da + entry.exponent - scratch.b_max[j];
          if (shift >= 0) [[likely]] {
            scratch.window[j] += static_cast<ExactInt128>(sa * entry.significand) << shift;
          } else {
            ExactAddProduct(row + j * kExactWords, a, entry.value);
          }
        }
      }
    // The window's bit 0 is the lsb of a product with exponents a_max + b_max - reach,
    // accumulator bit a_max + b_max - reach - 2 (ExactAddProduct's position).
    for (std::size_t j = 0; j < J; ++j)
      ExactAddInt128(row + j * kExactWords, scratch.window[j], a_max + scratch.b_max[j] - reach - 2);
    ExactNormalizeAll(words);
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
      continue;
    }
    const std::vector<ExampleTerms>& terms = chunk_terms_[chunks[segment_chunks[s].front()].slot];
    for (std::size_t p = 0; p < specs.size(); ++p) {
      const bool outer = terms[p].kind == ExampleTerms::Kind::kOuterProducts;
      const std::int64_t units = outer ? terms[p].a.dim(1) : offsets[p + 1] - offsets[p];
      const std::int64_t block = outer ? 16 : 2048;
      for (std::int64_t b = 0; b < units; b += block) sum_tasks.push_back({s, p, b, std::min(units, b + block)});
    }
  }
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, sum_tasks.size(), 1),
                    [&](const tbb::blocked_range<std::size_t>& range) {
                      for (std::size_t t = range.begin(); t < range.end(); ++t) {
                        const SumTask& task = sum_tasks[t];
                        const ExactSegment& seg = segments[task.segment];
                        std::int64_t* out = seg.grad_words.data() + offsets[task.parameter] * kExactWords;
                        const auto& mine = segment_chunks[task.segment];
                        const ExampleTerms& first = chunk_terms_[chunks[mine.front()].slot][task.parameter];
                        std::vector<const ExampleTerms*> terms;
                        std::vector<std::int64_t> counts;
                        for (const std::size_t c : mine) {
                          terms.push_back(&chunk_terms_[chunks[c].slot][task.parameter]);
                          counts.push_back(chunks[c].count);
                        }
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

void AddRegularizationWords(const Sequential<float>& model, const ParameterList<float>& weights, float scale,
                            std::span<std::int64_t> words) {
  std::int64_t offset = 0;
  for (std::size_t p = 0; p < weights.size(); ++p) {
    const std::int64_t size = weights[p].size();
    const double l2 = model.parameters()[p].spec.l2;
    if (l2 != 0.0) {
      const float coefficient = scale * static_cast<float>(l2);
      const float* w = weights[p].data();
      std::int64_t* first = words.data() + offset * kExactWords;
      tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, size, 8192),
                        [&](const tbb::blocked_range<std::int64_t>& r) {
                          for (std::int64_t k = r.begin(); k < r.end(); ++k)
                            ExactAddFloatNormalized(first + k * kExactWords, coefficient * (w[k] * 2.0f));
                        });
    }
    offset += size;
  }
}

float BatchRunner::ExactGradient(const ParameterList<float>& params, const Tensor<float>& images,
                                 std::span<const std::int32_t> labels, std::span<const float> coefficients,
                                 std::span<float> per_example_loss, std::span<std::int32_t> predictions,
                                 std::vector<std::int64_t>& words, ParameterList<float>& grads) {
  words.assign(static_cast<std::size_t>(model_.num_parameter_values() * kExactWords), 0);
  const ExactSegment whole{&params, 0, static_cast<std::int64_t>(labels.size()), words};
  RunExact(images, labels, coefficients, per_example_loss, predictions, std::span(&whole, 1));
  AddRegularizationWords(model_, params, 1.0f, words);
  std::int64_t offset = 0;
  for (auto& g : grads) {
    RoundWords(std::span(words).subspan(static_cast<std::size_t>(offset * kExactWords),
                                        static_cast<std::size_t>(g.size() * kExactWords)),
               g.span());
    offset += g.size();
  }
  ExactSum loss;
  for (std::size_t i = 0; i < labels.size(); ++i) loss.AddProduct(coefficients[i], per_example_loss[i]);
  loss.Add(model_.RegularizationLoss(params));
  return loss.ToFloat();
}

}  // namespace dtlab
