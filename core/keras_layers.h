// The Keras layer classes dtlab builds from a model.to_json() file: one reader per
// class, in one table (KerasLayerClasses). A reader checks the layer's "config" (every
// key it knows, every value range-checked; a key it does not know must be null) and
// returns the dtlab layers to build, as recipes that build them in float or double.
//
// Adding a layer class is one layer class (core/<layer>.h) and one reader with its
// line in the table of core/keras_layers.cc; the JSON walk (core/keras_model.h),
// the error for an unknown class and docs/models.md's list read the table.
//
// Thread safety: the table is immutable; readers are pure functions.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/layer.h"
#include "core/status.h"

namespace dtlab {

/// One dtlab layer to build once its input shape is known (a Reshape with -1 needs
/// it), in float (training) or double (the tests' references).
struct LayerRecipe {
  std::string name;         // the dtlab layer's name (the Keras name, or "<name>/softmax")
  std::size_t index = 0;    // the Keras layer's position in the file's "layers" list
  std::string keras_class;  // e.g. "Conv2D"
  bool softmax = false;     // a softmax over the last axis (a model may end in one)
  std::function<std::unique_ptr<Layer<float>>(const Shape& input)> make_float;
  std::function<std::unique_ptr<Layer<double>>(const Shape& input)> make_double;

  template <typename T>
  std::unique_ptr<Layer<T>> Make(const Shape& input) const {
    if constexpr (std::is_same_v<T, float>)
      return make_float(input);
    else
      return make_double(input);
  }
};

/// What a reader sees of one layer: its "config", with checked accessors whose
/// errors name the layer ("layers[3] 'conv2d_1' (Conv2D): strides ...").
class KerasLayerConfig {
 public:
  KerasLayerConfig(const nlohmann::json& config, std::size_t index, std::string name, std::string keras_class);

  const std::string& name() const { return name_; }
  std::size_t index() const { return index_; }
  const std::string& keras_class() const { return keras_class_; }
  /// InvalidArgument "layers[I] 'NAME' (CLASS): <problem>".
  Status Error(const std::string& problem) const;

  /// An integer in [min, max]; `fallback` if the key is absent or null.
  StatusOr<std::int64_t> Integer(std::string_view key, std::int64_t fallback, std::int64_t min, std::int64_t max) const;
  /// A pair of integers in [min, max], written [a, b] or as one integer (both);
  /// `fallback` if absent or null.
  StatusOr<std::pair<std::int64_t, std::int64_t>> Pair(std::string_view key,
                                                       std::pair<std::int64_t, std::int64_t> fallback, std::int64_t min,
                                                       std::int64_t max) const;
  /// A finite number in [min, max]; `fallback` if absent or null.
  StatusOr<double> Number(std::string_view key, double fallback, double min, double max) const;
  /// One of `allowed` (lower-case text); `fallback` if absent or null.
  StatusOr<std::string> Choice(std::string_view key, std::string_view fallback,
                               std::span<const std::string_view> allowed) const;
  /// Ok if the key is absent, null or equal to `expected` (a scalar, or a list of
  /// them); else "<key> must be <what>".
  Status Expect(std::string_view key, const nlohmann::json& expected, std::string_view what) const;
  /// A list of integers (Reshape's target_shape): each in [min, max], at most
  /// `max_length` of them.
  StatusOr<std::vector<std::int64_t>> IntegerList(std::string_view key, std::int64_t min, std::int64_t max,
                                                  std::size_t max_length) const;
  /// Keras's L2 regularizer: absent or null gives 0; {"class_name": "L2", "config":
  /// {"l2": x}} gives x (and L1L2 with l1 = 0); anything else is refused.
  StatusOr<double> L2Regularizer(std::string_view key) const;
  /// Ok if the initializer is absent, null or of class `expected` ("GlorotUniform",
  /// "Zeros"): dtlab draws its own initial values (docs/models.md).
  Status Initializer(std::string_view key, std::string_view expected) const;
  /// true or false; `fallback` if the key is absent or null.
  StatusOr<bool> Boolean(std::string_view key, bool fallback) const;
  /// Ok if every key of the config is name, trainable, dtype, in `known` or `more`,
  /// or holds null (a newer Keras's option left at its default); else names the
  /// first other key.
  Status OnlyKnownKeys(std::span<const std::string_view> known, std::span<const std::string_view> more = {}) const;

 private:
  const nlohmann::json* Find(std::string_view key) const;  // null if absent or null

  const nlohmann::json& config_;
  std::size_t index_;
  std::string name_, keras_class_;
};

/// Reads one layer's config into the recipes of the dtlab layers it becomes (one,
/// or two for an activation the layer does not fuse). Errors name the layer.
using KerasLayerReader = Status (*)(const KerasLayerConfig& config, std::vector<LayerRecipe>& out);

struct KerasLayerClass {
  std::string_view class_name;  // Keras's class_name
  KerasLayerReader read;
};

/// Every Keras layer class dtlab builds (InputLayer is read by the model itself).
std::span<const KerasLayerClass> KerasLayerClasses();

/// "InputLayer, Conv2D, ..." for messages and docs.
std::string SupportedKerasLayerNames();

}  // namespace dtlab
