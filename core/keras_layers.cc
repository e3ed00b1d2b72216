#include "core/keras_layers.h"

#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/activation_layer.h"
#include "core/batch_norm.h"
#include "core/conv2d.h"
#include "core/dense.h"
#include "core/dropout.h"
#include "core/pooling.h"
#include "core/reshape.h"
#include "core/text.h"

namespace dtlab {
namespace {

using Json = nlohmann::json;

// Bounds on what a file may ask for, far above any model dtlab trains in memory; the
// model's sizes are bounded again when it is built (core/keras_model.cc).
constexpr std::int64_t kMaxUnits = 1 << 24;      // Dense units, Conv2D filters
constexpr std::int64_t kMaxWindow = 1 << 12;     // kernel_size, pool_size, strides
constexpr std::int64_t kMaxDimension = 1 << 24;  // a Reshape target's dimension
constexpr double kMaxRegularizer = 1e6;

// A recipe from a generic lambda make(std::type_identity<T>, input) -> unique_ptr<L<T>>.
template <typename Make>
LayerRecipe Recipe(const KerasLayerConfig& config, std::string name, Make make) {
  LayerRecipe recipe;
  recipe.name = std::move(name);
  recipe.index = config.index();
  recipe.keras_class = config.keras_class();
  recipe.make_float = [make](const Shape& input) -> std::unique_ptr<Layer<float>> {
    return make(std::type_identity<float>{}, input);
  };
  recipe.make_double = [make](const Shape& input) -> std::unique_ptr<Layer<double>> {
    return make(std::type_identity<double>{}, input);
  };
  return recipe;
}

template <typename T>
using ActivationFunction = typename ActivationLayer<T>::Function;

// The softmax layer an activation='softmax' adds after a Dense or Conv2D.
LayerRecipe SoftmaxRecipe(const KerasLayerConfig& config, const std::string& name) {
  LayerRecipe recipe = Recipe(config, name, [name](auto type, const Shape&) {
    using T = typename decltype(type)::type;
    return std::make_unique<ActivationLayer<T>>(name, ActivationFunction<T>::kSoftmax, "Softmax");
  });
  recipe.softmax = true;
  return recipe;
}

enum class KerasActivation { kLinear, kRelu, kSoftmax };

constexpr std::array<std::string_view, 3> kActivations = {"linear", "relu", "softmax"};

StatusOr<KerasActivation> ReadActivation(const KerasLayerConfig& config) {
  DTLAB_ASSIGN_OR_RETURN(const std::string name, config.Choice("activation", "linear", kActivations));
  if (name == "relu") return KerasActivation::kRelu;
  if (name == "softmax") return KerasActivation::kSoftmax;
  return KerasActivation::kLinear;
}

constexpr std::array<std::string_view, 2> kPaddings = {"valid", "same"};

StatusOr<Padding> ReadPadding(const KerasLayerConfig& config) {
  DTLAB_ASSIGN_OR_RETURN(const std::string name, config.Choice("padding", "valid", kPaddings));
  return name == "same" ? Padding::kSame : Padding::kValid;
}

Status CheckChannelsLast(const KerasLayerConfig& config) {
  return config.Expect("data_format", "channels_last",
                       "channels_last (dtlab's images are NHWC; channels_first is not supported)");
}

// What Conv2D and Dense share: trainable, a bias, dtlab's initializers, L2 regularizers
// only, no constraints or activity regularizer.
StatusOr<L2Factors> ReadKernelAndBias(const KerasLayerConfig& config) {
  DTLAB_RETURN_IF_ERROR(config.Expect("trainable", true, "true (dtlab trains every layer's parameters)"));
  DTLAB_RETURN_IF_ERROR(config.Expect("use_bias", true, "true (dtlab's Conv2D and Dense have a bias)"));
  DTLAB_RETURN_IF_ERROR(config.Initializer("kernel_initializer", "GlorotUniform"));
  DTLAB_RETURN_IF_ERROR(config.Initializer("bias_initializer", "Zeros"));
  for (const char* key : {"activity_regularizer", "kernel_constraint", "bias_constraint"})
    DTLAB_RETURN_IF_ERROR(config.Expect(key, nullptr, "null (not supported)"));
  L2Factors l2;
  DTLAB_ASSIGN_OR_RETURN(l2.kernel, config.L2Regularizer("kernel_regularizer"));
  DTLAB_ASSIGN_OR_RETURN(l2.bias, config.L2Regularizer("bias_regularizer"));
  return l2;
}

// A fused activation: relu stays in the layer, softmax becomes a layer of its own.
template <typename Make>
void AddWithActivation(const KerasLayerConfig& config, KerasActivation activation, Make make,
                       std::vector<LayerRecipe>& out) {
  out.push_back(Recipe(config, config.name(), make));
  if (activation == KerasActivation::kSoftmax) out.push_back(SoftmaxRecipe(config, config.name() + "/softmax"));
}

// The keys of a layer with a kernel, a bias and a fused activation (Conv2D, Dense).
constexpr std::string_view kWeightedKeys[] = {
    "activation",       "use_bias",          "kernel_initializer",   "bias_initializer", "kernel_regularizer",
    "bias_regularizer", "kernel_constraint", "activity_regularizer", "bias_constraint"};

Status ReadConv2D(const KerasLayerConfig& config, std::vector<LayerRecipe>& out) {
  static constexpr std::string_view kKnown[] = {"filters",     "kernel_size",   "strides", "padding",
                                                "data_format", "dilation_rate", "groups"};
  DTLAB_RETURN_IF_ERROR(config.OnlyKnownKeys(kKnown, kWeightedKeys));
  DTLAB_ASSIGN_OR_RETURN(const std::int64_t filters, config.Integer("filters", -1, 1, kMaxUnits));
  DTLAB_ASSIGN_OR_RETURN(const auto kernel, config.Pair("kernel_size", {-1, -1}, 1, kMaxWindow));
  DTLAB_ASSIGN_OR_RETURN(const auto strides, config.Pair("strides", {1, 1}, 1, kMaxWindow));
  Conv2DOptions options;
  options.stride_height = strides.first, options.stride_width = strides.second;
  DTLAB_ASSIGN_OR_RETURN(options.padding, ReadPadding(config));
  DTLAB_RETURN_IF_ERROR(CheckChannelsLast(config));
  DTLAB_RETURN_IF_ERROR(config.Expect("dilation_rate", 1, "1 or [1, 1] (dilated convolutions are not supported)"));
  DTLAB_RETURN_IF_ERROR(config.Expect("groups", 1, "1 (grouped convolutions are not supported)"));
  DTLAB_ASSIGN_OR_RETURN(const KerasActivation activation, ReadActivation(config));
  DTLAB_ASSIGN_OR_RETURN(options.l2, ReadKernelAndBias(config));
  const Activation fused = activation == KerasActivation::kRelu ? Activation::kRelu : Activation::kLinear;
  const std::string name = config.name();
  AddWithActivation(
      config, activation,
      [=](auto type, const Shape&) {
        using T = typename decltype(type)::type;
        return std::make_unique<Conv2D<T>>(name, filters, kernel.first, kernel.second, fused, options);
      },
      out);
  return Status::Ok();
}

Status ReadDense(const KerasLayerConfig& config, std::vector<LayerRecipe>& out) {
  static constexpr std::string_view kKnown[] = {"units"};
  DTLAB_RETURN_IF_ERROR(config.OnlyKnownKeys(kKnown, kWeightedKeys));
  DTLAB_ASSIGN_OR_RETURN(const std::int64_t units, config.Integer("units", -1, 1, kMaxUnits));
  DTLAB_ASSIGN_OR_RETURN(const KerasActivation activation, ReadActivation(config));
  DTLAB_ASSIGN_OR_RETURN(const L2Factors l2, ReadKernelAndBias(config));
  const Activation fused = activation == KerasActivation::kRelu ? Activation::kRelu : Activation::kLinear;
  const std::string name = config.name();
  AddWithActivation(
      config, activation,
      [=](auto type, const Shape&) {
        using T = typename decltype(type)::type;
        return std::make_unique<Dense<T>>(name, units, fused, l2);
      },
      out);
  return Status::Ok();
}

StatusOr<PoolingOptions> ReadPooling(const KerasLayerConfig& config) {
  static constexpr std::string_view kKnown[] = {"pool_size", "padding", "strides", "data_format"};
  DTLAB_RETURN_IF_ERROR(config.OnlyKnownKeys(kKnown));
  PoolingOptions options;
  DTLAB_ASSIGN_OR_RETURN(const auto pool, config.Pair("pool_size", {2, 2}, 1, kMaxWindow));
  // Keras: strides default to pool_size.
  DTLAB_ASSIGN_OR_RETURN(const auto strides, config.Pair("strides", pool, 1, kMaxWindow));
  DTLAB_ASSIGN_OR_RETURN(options.padding, ReadPadding(config));
  DTLAB_RETURN_IF_ERROR(CheckChannelsLast(config));
  options.pool_height = pool.first, options.pool_width = pool.second;
  options.stride_height = strides.first, options.stride_width = strides.second;
  return options;
}

Status ReadMaxPooling2D(const KerasLayerConfig& config, std::vector<LayerRecipe>& out) {
  DTLAB_ASSIGN_OR_RETURN(const PoolingOptions options, ReadPooling(config));
  const std::string name = config.name();
  out.push_back(Recipe(config, name, [=](auto type, const Shape&) {
    using T = typename decltype(type)::type;
    return std::make_unique<MaxPooling2D<T>>(name, options);
  }));
  return Status::Ok();
}

Status ReadAveragePooling2D(const KerasLayerConfig& config, std::vector<LayerRecipe>& out) {
  DTLAB_ASSIGN_OR_RETURN(const PoolingOptions options, ReadPooling(config));
  const std::string name = config.name();
  out.push_back(Recipe(config, name, [=](auto type, const Shape&) {
    using T = typename decltype(type)::type;
    return std::make_unique<AveragePooling2D<T>>(name, options);
  }));
  return Status::Ok();
}

Status ReadFlatten(const KerasLayerConfig& config, std::vector<LayerRecipe>& out) {
  static constexpr std::string_view kKnown[] = {"data_format"};
  DTLAB_RETURN_IF_ERROR(config.OnlyKnownKeys(kKnown));
  DTLAB_RETURN_IF_ERROR(CheckChannelsLast(config));
  const std::string name = config.name();
  out.push_back(Recipe(config, name, [=](auto type, const Shape&) {
    using T = typename decltype(type)::type;
    return std::make_unique<Reshape<T>>(name, Shape{});
  }));
  return Status::Ok();
}

Status ReadReshape(const KerasLayerConfig& config, std::vector<LayerRecipe>& out) {
  static constexpr std::string_view kKnown[] = {"target_shape"};
  DTLAB_RETURN_IF_ERROR(config.OnlyKnownKeys(kKnown));
  DTLAB_ASSIGN_OR_RETURN(const Shape target, config.IntegerList("target_shape", -1, kMaxDimension, 3));
  if (target.empty()) return config.Error("target_shape must list 1 to 3 dimensions");
  int unknown = 0;
  for (const std::int64_t d : target) {
    if (d == 0) return config.Error("target_shape's dimensions must be positive (or one -1), got 0");
    unknown += d == -1;
  }
  if (unknown > 1) return config.Error("target_shape may hold one -1, not " + std::to_string(unknown));
  const std::string name = config.name();
  out.push_back(Recipe(config, name, [=](auto type, const Shape& input) {
    using T = typename decltype(type)::type;
    // Keras's -1: what is left of the input's size. If it does not divide, the -1
    // stays and the layer does not fit its input (the model says so).
    Shape resolved = target;
    std::int64_t known = 1;
    for (const std::int64_t d : target) known = d == -1 ? known : known * d;
    const std::int64_t size = NumElements(input);
    for (std::int64_t& d : resolved)
      if (d == -1 && known > 0 && size % known == 0) d = size / known;
    return std::make_unique<Reshape<T>>(name, resolved);
  }));
  return Status::Ok();
}

// Activation, ReLU and Softmax as layers.
void AddActivationLayer(const KerasLayerConfig& config, KerasActivation activation, std::string_view kind,
                        std::vector<LayerRecipe>& out) {
  const std::string name = config.name();
  LayerRecipe recipe = Recipe(config, name, [=](auto type, const Shape&) {
    using T = typename decltype(type)::type;
    const auto function = activation == KerasActivation::kRelu      ? ActivationFunction<T>::kRelu
                          : activation == KerasActivation::kSoftmax ? ActivationFunction<T>::kSoftmax
                                                                    : ActivationFunction<T>::kLinear;
    return std::make_unique<ActivationLayer<T>>(name, function, kind);
  });
  recipe.softmax = activation == KerasActivation::kSoftmax;
  out.push_back(std::move(recipe));
}

Status ReadActivationLayer(const KerasLayerConfig& config, std::vector<LayerRecipe>& out) {
  static constexpr std::string_view kKnown[] = {"activation"};
  DTLAB_RETURN_IF_ERROR(config.OnlyKnownKeys(kKnown));
  DTLAB_ASSIGN_OR_RETURN(const KerasActivation activation, ReadActivation(config));
  AddActivationLayer(config, activation, "Activation", out);
  return Status::Ok();
}

Status ReadReLU(const KerasLayerConfig& config, std::vector<LayerRecipe>& out) {
  static constexpr std::string_view kKnown[] = {"max_value", "negative_slope", "threshold"};
  DTLAB_RETURN_IF_ERROR(config.OnlyKnownKeys(kKnown));
  DTLAB_RETURN_IF_ERROR(config.Expect("max_value", nullptr, "null (a capped ReLU is not supported)"));
  DTLAB_RETURN_IF_ERROR(config.Expect("negative_slope", 0, "0 (a leaky ReLU is not supported)"));
  DTLAB_RETURN_IF_ERROR(config.Expect("threshold", 0, "0 (a thresholded ReLU is not supported)"));
  AddActivationLayer(config, KerasActivation::kRelu, "ReLU", out);
  return Status::Ok();
}

Status ReadSoftmax(const KerasLayerConfig& config, std::vector<LayerRecipe>& out) {
  static constexpr std::string_view kKnown[] = {"axis"};
  DTLAB_RETURN_IF_ERROR(config.OnlyKnownKeys(kKnown));
  DTLAB_RETURN_IF_ERROR(config.Expect("axis", -1, "-1 (the softmax runs over the last axis)"));
  AddActivationLayer(config, KerasActivation::kSoftmax, "Softmax", out);
  return Status::Ok();
}

Status ReadDropout(const KerasLayerConfig& config, std::vector<LayerRecipe>& out) {
  static constexpr std::string_view kKnown[] = {"rate", "seed", "noise_shape"};
  DTLAB_RETURN_IF_ERROR(config.OnlyKnownKeys(kKnown));
  DTLAB_ASSIGN_OR_RETURN(const double rate, config.Number("rate", -1, 0, 1));
  if (rate < 0) return config.Error("rate must be a number in [0, 1], and is missing");
  DTLAB_RETURN_IF_ERROR(config.Expect("noise_shape", nullptr, "null (masks shared across axes are not supported)"));
  // `seed` is read and left: dtlab's masks come from its own counter-based streams.
  DTLAB_RETURN_IF_ERROR(
      config.Integer("seed", 0, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max())
          .status());
  const std::string name = config.name();
  out.push_back(Recipe(config, name, [=](auto type, const Shape&) {
    using T = typename decltype(type)::type;
    return std::make_unique<Dropout<T>>(name, rate);
  }));
  return Status::Ok();
}

Status ReadBatchNormalization(const KerasLayerConfig& config, std::vector<LayerRecipe>& out) {
  static constexpr std::string_view kKnown[] = {"axis",
                                                "momentum",
                                                "epsilon",
                                                "center",
                                                "scale",
                                                "synchronized",
                                                "beta_initializer",
                                                "gamma_initializer",
                                                "moving_mean_initializer",
                                                "moving_variance_initializer",
                                                "beta_regularizer",
                                                "gamma_regularizer",
                                                "beta_constraint",
                                                "gamma_constraint",
                                                "renorm",
                                                "renorm_clipping",
                                                "renorm_momentum",
                                                "virtual_batch_size",
                                                "adjustment",
                                                "fused"};
  DTLAB_RETURN_IF_ERROR(config.OnlyKnownKeys(kKnown));
  DTLAB_RETURN_IF_ERROR(config.Expect("trainable", true, "true (a frozen BatchNormalization is not supported)"));
  DTLAB_RETURN_IF_ERROR(
      config.Expect("axis", -1, "-1 (dtlab normalizes over the last axis: the channels of NHWC activations)"));
  BatchNormConfig bn;
  DTLAB_ASSIGN_OR_RETURN(bn.momentum, config.Number("momentum", 0.99, 0, 1));
  DTLAB_ASSIGN_OR_RETURN(bn.epsilon, config.Number("epsilon", 1e-3, 1e-30, 1e3));
  DTLAB_ASSIGN_OR_RETURN(bn.center, config.Boolean("center", true));
  DTLAB_ASSIGN_OR_RETURN(bn.scale, config.Boolean("scale", true));
  DTLAB_ASSIGN_OR_RETURN(bn.synchronized, config.Boolean("synchronized", false));
  DTLAB_RETURN_IF_ERROR(config.Initializer("beta_initializer", "Zeros"));
  DTLAB_RETURN_IF_ERROR(config.Initializer("gamma_initializer", "Ones"));
  DTLAB_RETURN_IF_ERROR(config.Initializer("moving_mean_initializer", "Zeros"));
  DTLAB_RETURN_IF_ERROR(config.Initializer("moving_variance_initializer", "Ones"));
  for (const char* key : {"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint",
                          "renorm_clipping", "virtual_batch_size", "adjustment"})
    DTLAB_RETURN_IF_ERROR(config.Expect(key, nullptr, "null (not supported)"));
  DTLAB_RETURN_IF_ERROR(config.Expect("renorm", false, "false (batch renormalization is not supported)"));
  const std::string name = config.name();
  out.push_back(Recipe(config, name, [=](auto type, const Shape&) {
    using T = typename decltype(type)::type;
    return std::make_unique<BatchNormalization<T>>(name, bn);
  }));
  return Status::Ok();
}

// The table: Keras class name, reader. InputLayer is the model's (core/keras_model.cc).
constexpr KerasLayerClass kLayerClasses[] = {
    {"Conv2D", ReadConv2D},
    {"MaxPooling2D", ReadMaxPooling2D},
    {"AveragePooling2D", ReadAveragePooling2D},
    {"Flatten", ReadFlatten},
    {"Reshape", ReadReshape},
    {"Dense", ReadDense},
    {"Activation", ReadActivationLayer},
    {"ReLU", ReadReLU},
    {"Softmax", ReadSoftmax},
    {"Dropout", ReadDropout},
    {"BatchNormalization", ReadBatchNormalization},
};

// A value as a message quotes it: short, printable.
std::string Quoted(const Json& value) { return Printable(value.dump(), 40); }

}  // namespace

KerasLayerConfig::KerasLayerConfig(const Json& config, std::size_t index, std::string name, std::string keras_class)
    : config_(config), index_(index), name_(std::move(name)), keras_class_(std::move(keras_class)) {}

Status KerasLayerConfig::Error(const std::string& problem) const {
  return Status::InvalidArgument("layers[" + std::to_string(index_) + "] '" + name_ + "' (" + keras_class_ +
                                 "): " + problem);
}

const Json* KerasLayerConfig::Find(std::string_view key) const {
  const auto it = config_.find(key);
  if (it == config_.end() || it->is_null()) return nullptr;
  return &*it;
}

StatusOr<std::int64_t> KerasLayerConfig::Integer(std::string_view key, std::int64_t fallback, std::int64_t min,
                                                 std::int64_t max) const {
  const Json* value = Find(key);
  const std::string range = " must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (value == nullptr) {
    if (fallback < min || fallback > max) return Error(std::string(key) + range + ", and is missing");
    return fallback;
  }
  if (!value->is_number_integer()) return Error(std::string(key) + range + ", got " + Quoted(*value));
  // A JSON integer is int64 or uint64 in nlohmann; compare in the type it holds.
  // nlohmann holds a non-negative JSON integer as uint64: range-check it there first.
  if (value->is_number_unsigned() && value->get<std::uint64_t>() > static_cast<std::uint64_t>(max))
    return Error(std::string(key) + range + ", got " + Quoted(*value));
  const auto v = value->get<std::int64_t>();
  if (v < min || v > max) return Error(std::string(key) + range + ", got " + Quoted(*value));
  return v;
}

StatusOr<std::pair<std::int64_t, std::int64_t>> KerasLayerConfig::Pair(std::string_view key,
                                                                       std::pair<std::int64_t, std::int64_t> fallback,
                                                                       std::int64_t min, std::int64_t max) const {
  const Json* value = Find(key);
  const std::string what = std::string(key) + " must be an integer or a list of two, each in [" + std::to_string(min) +
                           ", " + std::to_string(max) + "]";
  if (value == nullptr) {
    if (fallback.first < min || fallback.first > max || fallback.second < min || fallback.second > max)
      return Error(what + ", and is missing");
    return fallback;
  }
  auto one = [&](const Json& v) -> std::optional<std::int64_t> {
    if (!v.is_number_integer()) return std::nullopt;
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(max)) return std::nullopt;
    const auto i = v.get<std::int64_t>();
    if (i < min || i > max) return std::nullopt;
    return i;
  };
  if (value->is_array() && value->size() == 2) {
    const auto a = one((*value)[0]), b = one((*value)[1]);
    if (a && b) return std::pair(*a, *b);
  } else if (const auto a = one(*value)) {
    return std::pair(*a, *a);
  }
  return Error(what + ", got " + Quoted(*value));
}

StatusOr<double> KerasLayerConfig::Number(std::string_view key, double fallback, double min, double max) const {
  const Json* value = Find(key);
  if (value == nullptr) return fallback;
  std::ostringstream range;
  range << " must be a number in [" << min << ", " << max << "]";
  if (!value->is_number()) return Error(std::string(key) + range.str() + ", got " + Quoted(*value));
  const double v = value->get<double>();
  if (!std::isfinite(v) || v < min || v > max) return Error(std::string(key) + range.str() + ", got " + Quoted(*value));
  return v;
}

StatusOr<std::string> KerasLayerConfig::Choice(std::string_view key, std::string_view fallback,
                                               std::span<const std::string_view> allowed) const {
  const Json* value = Find(key);
  if (value == nullptr) return std::string(fallback);
  if (value->is_string()) {
    const std::string text = value->get<std::string>();
    for (const std::string_view a : allowed)
      if (text == a) return text;
  }
  return Error(std::string(key) + " " + Quoted(*value) + " is not supported (supported: " + JoinText(allowed, ", ") +
               ")");
}

Status KerasLayerConfig::Expect(std::string_view key, const Json& expected, std::string_view what) const {
  const Json* value = Find(key);
  if (value == nullptr || *value == expected) return Status::Ok();
  // [1, 1] for 1: Keras writes a tuple for what a constructor took as one number.
  if (value->is_array() && !value->empty() && !expected.is_array()) {
    bool all = true;
    for (const Json& v : *value) all &= v == expected;
    if (all) return Status::Ok();
  }
  return Error(std::string(key) + " must be " + std::string(what) + ", got " + Quoted(*value));
}

StatusOr<std::vector<std::int64_t>> KerasLayerConfig::IntegerList(std::string_view key, std::int64_t min,
                                                                  std::int64_t max, std::size_t max_length) const {
  const Json* value = Find(key);
  const std::string what = std::string(key) + " must be a list of at most " + std::to_string(max_length) +
                           " integers in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (value == nullptr) return Error(what + ", and is missing");
  if (!value->is_array() || value->size() > max_length) return Error(what + ", got " + Quoted(*value));
  std::vector<std::int64_t> out;
  for (const Json& v : *value) {
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(max)))
      return Error(what + ", got " + Quoted(*value));
    const auto i = v.get<std::int64_t>();
    if (i < min || i > max) return Error(what + ", got " + Quoted(*value));
    out.push_back(i);
  }
  return out;
}

StatusOr<double> KerasLayerConfig::L2Regularizer(std::string_view key) const {
  const Json* value = Find(key);
  if (value == nullptr) return 0.0;
  const std::string what =
      std::string(key) + " must be null or an L2 regularizer (" + std::string(key) + "=keras.regularizers.L2(x)); ";
  if (!value->is_object()) return Error(what + "got " + Quoted(*value));
  const auto name = value->find("class_name");
  const auto config = value->find("config");
  if (name == value->end() || !name->is_string() || config == value->end() || !config->is_object())
    return Error(what + "got " + Quoted(*value));
  const std::string class_name = name->get<std::string>();
  auto factor = [&](const char* field) -> std::optional<double> {
    const auto f = config->find(field);
    if (f == config->end() || f->is_null()) return 0.0;
    if (!f->is_number()) return std::nullopt;
    const double x = f->get<double>();
    if (!std::isfinite(x) || x < 0 || x > kMaxRegularizer) return std::nullopt;
    return x;
  };
  if (class_name == "L2" || class_name == "L1L2") {
    const auto l1 = factor("l1"), l2 = factor("l2");
    if (!l2)
      return Error(std::string(key) + "'s l2 must be a number in [0, 1e6], got " + Quoted(config->value("l2", Json())));
    if (!l1 || *l1 != 0) return Error(what + "an L1 term is not supported");
    return *l2;
  }
  return Error(what + "the " + Printable(class_name, 40) + " regularizer is not supported");
}

StatusOr<bool> KerasLayerConfig::Boolean(std::string_view key, bool fallback) const {
  const Json* value = Find(key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) return Error(std::string(key) + " must be true or false, not " + Quoted(*value));
  return value->get<bool>();
}

Status KerasLayerConfig::Initializer(std::string_view key, std::string_view expected) const {
  const Json* value = Find(key);
  if (value == nullptr) return Status::Ok();
  const Json* name = nullptr;
  if (value->is_object()) {
    const auto it = value->find("class_name");
    if (it != value->end()) name = &*it;
  } else if (value->is_string()) {
    name = value;
  }
  // Keras 2 spells GlorotUniform glorot_uniform when given as a string.
  if (name != nullptr && name->is_string()) {
    std::string text = name->get<std::string>();
    if (text == expected || (expected == "GlorotUniform" && text == "glorot_uniform") ||
        (expected == "Zeros" && text == "zeros") || (expected == "Ones" && text == "ones"))
      return Status::Ok();
  }
  return Error(std::string(key) + " must be " + std::string(expected) + ", got " + Quoted(*value) +
               " (dtlab draws glorot_uniform kernels and zero biases from its own seed)");
}

Status KerasLayerConfig::OnlyKnownKeys(std::span<const std::string_view> known,
                                       std::span<const std::string_view> more) const {
  static constexpr std::string_view kEveryLayer[] = {"name", "trainable", "dtype"};
  for (auto it = config_.begin(); it != config_.end(); ++it) {
    if (it->is_null()) continue;
    bool found = false;
    for (const auto keys : {std::span<const std::string_view>(kEveryLayer), known, more})
      for (const std::string_view k : keys) found |= it.key() == k;
    if (!found) return Error("option '" + Printable(it.key(), 40) + "' is not supported (set to " + Quoted(*it) + ")");
  }
  return Status::Ok();
}

std::span<const KerasLayerClass> KerasLayerClasses() { return kLayerClasses; }

std::string SupportedKerasLayerNames() {
  std::string names = "InputLayer";
  for (const KerasLayerClass& c : kLayerClasses) names += ", " + std::string(c.class_name);
  return names;
}

}  // namespace dtlab
