// Dropout: Keras's inverted dropout, active in training steps only (the test set,
// dtlab eval and every forward pass without a training step are the identity).
//
// The arithmetic is TensorFlow's (tf.nn.experimental.stateless_dropout, which
// Keras 3's Dropout calls): scale = float(1 / (1 - rate)) computed in double, then
// y = keep ? x * scale : +0, with keep = (u >= float(rate)) for a uniform u in [0,
// 1); its gradient is dx = keep ? dy * scale : +0. rate = 1 drops everything.
//
// Where the masks come from is dtlab's own (docs/models.md, "Dropout"): element k of
// an example's activation at this layer keeps with u = the k-th UniformFloat of
//   CounterRng(DropoutStreamKey(seed, step, layer), kDropout, stream)
// where `stream` is, by default (DropoutRng::kKeyed), the example's index in the
// data set (its position in the step's global batch where no data set index is
// known). So a replica and the one-device reference draw the same mask for every
// example, whatever the replica count or the micro-batch of an accumulated step it
// lands in, and a distributed run equals one device (bitwise in exact mode), which
// TensorFlow's per-replica generators cannot offer. DropoutRng::kPerReplica keys the stream by the replica and the
// example's position in the replica's batch, as TF's per-replica streams depend on the replica: the run then depends on
// the replica count, and --check-reference says so.
//
// Thread safety: as Layer.
#pragma once

#include <cstdint>

#include "core/enum_names.h"
#include "core/layer.h"
#include "core/rng.h"

namespace dtlab {

/// What keys an example's dropout masks (--dropout-rng).
enum class DropoutRng { kKeyed, kPerReplica };

inline constexpr NameTable<DropoutRng, 2> kDropoutRngs = {
    {{"keyed", DropoutRng::kKeyed}, {"per-replica", DropoutRng::kPerReplica}}};

inline StatusOr<DropoutRng> ParseDropoutRng(std::string_view name) {
  return ParseEnumName(name, kDropoutRngs, "dropout rng");
}
inline std::string_view DropoutRngName(DropoutRng rng) { return EnumName(rng, kDropoutRngs); }

/// The stream of an example under `rng`: `example` (its data set index, or its
/// position in the step's global batch) under kKeyed, or (replica + 1) * 2^32 + its
/// position in the replica's batch.
inline std::uint64_t DropoutStream(DropoutRng rng, std::int64_t example, std::int32_t replica,
                                   std::int64_t local_position) {
  if (rng == DropoutRng::kKeyed) return static_cast<std::uint64_t>(example);
  return ((static_cast<std::uint64_t>(replica) + 1) << 32) + static_cast<std::uint64_t>(local_position);
}

/// The key of layer `layer`'s masks at step `step` of a run seeded `seed`: one
/// Philox block of (step, layer) under the seed, so every (step, layer) has its own
/// streams.
std::uint64_t DropoutStreamKey(std::uint64_t seed, std::int64_t step, std::size_t layer);

/// One example's mask at one layer and step: keep[k] = 1 where element k is kept
/// (u >= float(rate)), from the stream `stream` under `key` (DropoutStreamKey). The
/// CPU layer and the device backends (which draw on the host and apply on the
/// device) both draw with it. REQUIRES: keep holds `width` values.
template <typename Keep>
void DrawDropoutMask(std::uint64_t key, std::uint64_t stream, double rate, std::int64_t width, Keep* keep) {
  const float threshold = static_cast<float>(rate);
  CounterRng rng(key, RngPurpose::kDropout, stream);
  for (std::int64_t k = 0; k < width; ++k) keep[k] = static_cast<Keep>(rng.UniformFloat() >= threshold);
}

/// The factor a kept element is multiplied by: float(1 / (1 - rate)), computed in double.
template <typename T>
T DropoutScale(double rate) {
  return rate >= 1.0 ? T(0) : static_cast<T>(1.0 / (1.0 - rate));
}

template <typename T>
class Dropout final : public Layer<T> {
 public:
  /// REQUIRES: 0 <= rate <= 1.
  Dropout(std::string name, double rate) : Layer<T>(std::move(name)), rate_(rate) {}

  std::string_view kind() const override { return "Dropout"; }
  double rate() const { return rate_; }
  Shape OutputShape(const Shape& example_input) const override { return example_input; }
  void Forward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, Tensor<T>& y,
               LayerCache<T>& cache) const override;
  void Backward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y, Tensor<T>& dy,
                Tensor<T>* dx, std::span<Tensor<T>* const> param_grads, LayerCache<T>& cache,
                std::span<Tensor<T>* const> param_grad_magnitudes = {}) const override;

 private:
  double rate_;
};

}  // namespace dtlab
