#include "core/keras_model.h"

#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/checked_number.h"
#include "core/conv2d.h"
#include "core/file_io.h"
#include "core/text.h"

namespace dtlab {
namespace {

using Json = nlohmann::json;

constexpr std::int64_t kMaxInputDimension = std::int64_t{1} << 20;
constexpr std::size_t kMaxNameBytes = 128;

// A name that stays a name: it becomes part of parameter and checkpoint tensor names.
bool IsName(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameBytes || name[0] == '.') return false;
  for (const char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
          c == '-'))
      return false;
  return true;
}

std::optional<std::int64_t> CheckedElements(const Shape& shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) {
    if (d < 0) return std::nullopt;
    const auto product = CheckedMultiply(n, d);
    if (!product) return std::nullopt;
    n = *product;
  }
  return n;
}

// Keras's dtype: absent, null, "float32", or a DTypePolicy named float32.
bool IsFloat32(const Json& object) {
  const auto it = object.find("dtype");
  if (it == object.end() || it->is_null()) return true;
  if (it->is_string()) return *it == "float32";
  if (it->is_object()) {
    const auto config = it->find("config");
    if (config == it->end() || !config->is_object()) return false;
    const auto name = config->find("name");
    return name != config->end() && *name == "float32";
  }
  return false;
}

// Keras 3 writes "module": "keras.layers" (and "keras" for the model); Keras 2 none.
// A layer registered by user code has another module or a registered_name.
bool IsKerasClass(const Json& object) {
  const auto module = object.find("module");
  if (module != object.end() && !module->is_null() &&
      !(module->is_string() && module->get<std::string>().starts_with("keras")))
    return false;
  const auto registered = object.find("registered_name");
  return registered == object.end() || registered->is_null() ||
         (registered->is_string() && *registered == object.value("class_name", Json()));
}

// [null, d1, ..., dk] -> {d1, ..., dk}: the batch dimension (null or a number) is left out.
StatusOr<Shape> ReadBatchShape(const Json& value, const std::string& where) {
  const std::string what = where + " must be [null, d1, ...] with 1 to 3 dimensions, each in [1, " +
                           std::to_string(kMaxInputDimension) + "]";
  if (!value.is_array() || value.size() < 2 || value.size() > 4)
    return Status::InvalidArgument(what + ", got " + Printable(value.dump(), 40));
  if (!value[0].is_null() && !value[0].is_number_integer())
    return Status::InvalidArgument(what + ", got " + Printable(value.dump(), 40));
  Shape shape;
  for (std::size_t i = 1; i < value.size(); ++i) {
    const Json& d = value[i];
    if (!d.is_number_integer() || (d.is_number_unsigned() && d.get<std::uint64_t>() > kMaxInputDimension) ||
        d.get<std::int64_t>() < 1 || d.get<std::int64_t>() > kMaxInputDimension)
      return Status::InvalidArgument(what + ", got " + Printable(value.dump(), 40));
    shape.push_back(d.get<std::int64_t>());
  }
  return shape;
}

std::string LayerTitle(const LayerRecipe& recipe) {
  return "layers[" + std::to_string(recipe.index) + "] '" + recipe.name + "' (" + recipe.keras_class + ")";
}

// Why a layer may not fit its input, by its Keras class.
std::string FitHint(const std::string& keras_class) {
  if (keras_class == "Conv2D" || keras_class == "MaxPooling2D" || keras_class == "AveragePooling2D")
    return ": it needs an image [H, W, C], at least as large as its window with valid padding";
  if (keras_class == "Dense") return ": dtlab's Dense takes a vector (put a Flatten before it)";
  if (keras_class == "Reshape") return ": the target must hold as many values as the input";
  return "";
}

}  // namespace

StatusOr<KerasModel> ParseKerasModel(std::string_view text, std::string_view source) {
  const std::string prefix = std::string(source) + ": ";
  auto fail = [&](const std::string& message) { return Status::InvalidArgument(prefix + message); };
  if (const std::string error = JsonNestingError(text, kMaxModelJsonDepth); !error.empty())
    return fail("the model's JSON " + error);
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {
    return fail(std::string("not JSON (write the file with model.to_json()): ") + Printable(e.what(), 120));
  }
  if (!root.is_object() || !root.contains("class_name") || !root["class_name"].is_string())
    return fail("not a Keras model: no class_name (write the file with model.to_json())");
  const std::string model_class = root["class_name"].get<std::string>();
  if (model_class != "Sequential" || !IsKerasClass(root))
    return fail("a " + Printable(model_class, 40) +
                " model; dtlab reads Sequential models (keras.Sequential([...]).to_json())");
  const auto config_it = root.find("config");
  if (config_it == root.end() || !config_it->is_object()) return fail("the model has no config object");
  const Json& config = *config_it;
  KerasModel model;
  model.name = "sequential";
  if (const auto name = config.find("name"); name != config.end() && !name->is_null()) {
    if (!name->is_string() || !IsName(name->get<std::string>()))
      return fail("the model's name " + Printable(name->dump(), 40) + " is not a name (1 to 128 of A-Z a-z 0-9 _ . -)");
    model.name = name->get<std::string>();
  }
  if (!IsFloat32(config)) return fail("the model's dtype must be float32 (dtlab trains in float32)");
  const auto layers_it = config.find("layers");
  if (layers_it == config.end() || !layers_it->is_array() || layers_it->empty())
    return fail("the model has no layers list");
  if (layers_it->size() > kMaxModelLayers)
    return fail("the model has " + std::to_string(layers_it->size()) + " layers; dtlab reads at most " +
                std::to_string(kMaxModelLayers));
  std::optional<Shape> input;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < layers_it->size(); ++i) {
    const Json& layer = (*layers_it)[i];
    const std::string at = "layers[" + std::to_string(i) + "]";
    if (!layer.is_object() || !layer.contains("class_name") || !layer["class_name"].is_string())
      return fail(at + " is not a Keras layer (no class_name)");
    const std::string keras_class = Printable(layer["class_name"].get<std::string>(), 40);
    const auto layer_config = layer.find("config");
    if (layer_config == layer.end() || !layer_config->is_object())
      return fail(at + " (" + keras_class + ") has no config object");
    const auto name_it = layer_config->find("name");
    if (name_it == layer_config->end() || !name_it->is_string() || !IsName(name_it->get<std::string>()))
      return fail(at + " (" + keras_class + "): its name " +
                  (name_it == layer_config->end() ? std::string("is missing") : Printable(name_it->dump(), 40)) +
                  " is not a name (1 to 128 of A-Z a-z 0-9 _ . -)");
    const std::string name = name_it->get<std::string>();
    const std::string title = at + " '" + name + "' (" + keras_class + ")";
    if (std::find(names.begin(), names.end(), name) != names.end())
      return fail(title + ": another layer has this name; layer names must be unique");
    names.push_back(name);
    if (!IsKerasClass(layer))
      return fail(title + ": a layer class registered outside Keras is not supported (dtlab reads " +
                  SupportedKerasLayerNames() + ")");
    if (!IsFloat32(*layer_config)) return fail(title + ": dtype must be float32 (dtlab trains in float32)");
    if (keras_class == "InputLayer") {
      if (i != 0) return fail(title + ": an InputLayer must come first");
      const auto shape = layer_config->contains("batch_shape") ? layer_config->find("batch_shape")
                                                               : layer_config->find("batch_input_shape");
      if (shape == layer_config->end()) return fail(title + ": no batch_shape");
      DTLAB_ASSIGN_OR_RETURN(input, ReadBatchShape(*shape, prefix + title + ": batch_shape"));
      for (const char* flag : {"sparse", "ragged", "optional"})
        if (layer_config->contains(flag) && !(*layer_config)[flag].is_null() && (*layer_config)[flag] != false)
          return fail(title + ": " + flag + " inputs are not supported");
      continue;
    }
    const KerasLayerClass* found = nullptr;
    for (const KerasLayerClass& c : KerasLayerClasses())
      if (c.class_name == keras_class) found = &c;
    if (found == nullptr)
      return fail(title + ": this layer class is not supported (yet); dtlab reads " + SupportedKerasLayerNames() +
                  " (docs/models.md)");
    const KerasLayerConfig reader(*layer_config, i, name, keras_class);
    if (Status read = found->read(reader, model.layers); !read.ok()) return fail(read.message());
  }
  if (!input) {
    const auto build = config.find("build_input_shape");
    if (build == config.end() || build->is_null())
      return fail(
          "the model has no input shape: start it with keras.Input(shape=...) (an InputLayer), or build it "
          "before model.to_json()");
    DTLAB_ASSIGN_OR_RETURN(input, ReadBatchShape(*build, prefix + "build_input_shape"));
  }
  if (model.layers.empty()) return fail("the model has no layer besides its input");
  model.input_shape = *input;
  model.canonical_json = root.dump();
  return model;
}

StatusOr<KerasModel> ReadKerasModelFile(const std::string& path) {
  DTLAB_ASSIGN_OR_RETURN(const std::string text, ReadRegularFile(path, kMaxModelFileBytes, "model file"));
  return ParseKerasModel(text, Printable(path, 200));
}

template <typename T>
StatusOr<std::unique_ptr<Sequential<T>>> BuildKerasModel(const KerasModel& model, const Shape& image_shape,
                                                         std::int64_t num_classes, const std::string& name,
                                                         std::string_view source) {
  const std::string prefix = std::string(source) + ": ";
  auto fail = [&](const std::string& message) { return Status::InvalidArgument(prefix + message); };
  const Shape& input = model.input_shape;
  const bool holds_examples =
      input == image_shape ||
      (image_shape.size() == 3 && image_shape[2] == 1 && input == Shape{image_shape[0], image_shape[1]}) ||
      (input.size() == 1 && input[0] == NumElements(image_shape));
  if (!holds_examples)
    return fail("the model's input " + ShapeToString(input) + " does not hold the data set's examples " +
                ShapeToString(image_shape) + " (an input of [H, W, C], [H, W] for one channel, or [H*W*C] does)");
  std::vector<std::unique_ptr<Layer<T>>> layers;
  bool softmax_output = false;
  Shape shape = input;
  std::int64_t parameter_values = 0;
  for (std::size_t k = 0; k < model.layers.size(); ++k) {
    const LayerRecipe& recipe = model.layers[k];
    const std::string title = LayerTitle(recipe);
    if (recipe.softmax && k + 1 == model.layers.size() && shape.size() == 1) {
      softmax_output = true;  // the loss applies it (docs/models.md, "A final softmax")
      break;
    }
    std::unique_ptr<Layer<T>> layer = recipe.Make<T>(shape);
    for (const ParameterSpec& spec : layer->Parameters(shape)) {
      const auto values = CheckedElements(spec.shape);
      if (!values || *values > kMaxParameterValues || parameter_values + *values > kMaxParameterValues)
        return fail(title + ": its " + spec.name + " " + ShapeToString(spec.shape) + " makes the model's parameters " +
                    "more than " + std::to_string(kMaxParameterValues) + " values");
      parameter_values += *values;
    }
    const Shape out = layer->OutputShape(shape);
    if (out.empty())
      return fail(title + " does not fit its input of shape " + ShapeToString(shape) + FitHint(recipe.keras_class));
    const auto out_values = CheckedElements(out);
    std::optional<std::int64_t> patch_values = 1;
    if (const auto* conv = dynamic_cast<const Conv2D<T>*>(layer.get()))
      patch_values = CheckedElements({out[0], out[1], conv->kernel_height(), conv->kernel_width(), shape[2]});
    if (!out_values || *out_values > kMaxValuesPerExample || !patch_values || *patch_values > kMaxValuesPerExample)
      return fail(title + ": its output " + ShapeToString(out) +
                  (out_values && *out_values <= kMaxValuesPerExample ? " (with its patch matrix)" : "") +
                  " holds more than " + std::to_string(kMaxValuesPerExample) + " values per example");
    layers.push_back(std::move(layer));
    shape = out;
  }
  if (shape.size() != 1 || shape[0] < num_classes)
    return fail("the model's output is " + ShapeToString(shape) + " per example; dtlab needs a vector of at least " +
                std::to_string(num_classes) + " logits, one per class (end the model with Dense(" +
                std::to_string(num_classes) + "))");
  return std::make_unique<Sequential<T>>(name, input, std::move(layers),
                                         softmax_output ? FinalSoftmax::kAppliedByLoss : FinalSoftmax::kNone);
}

template <typename T>
StatusOr<std::unique_ptr<Sequential<T>>> LoadKerasModel(std::string_view text, std::string_view source,
                                                        const Shape& image_shape, std::int64_t num_classes) {
  DTLAB_ASSIGN_OR_RETURN(KerasModel model, ParseKerasModel(text, source));
  DTLAB_ASSIGN_OR_RETURN(auto built, BuildKerasModel<T>(model, image_shape, num_classes, model.name, source));
  built->set_description_json(std::move(model.canonical_json));
  return built;
}

template StatusOr<std::unique_ptr<Sequential<float>>> LoadKerasModel<float>(std::string_view, std::string_view,
                                                                            const Shape&, std::int64_t);
template StatusOr<std::unique_ptr<Sequential<double>>> LoadKerasModel<double>(std::string_view, std::string_view,
                                                                              const Shape&, std::int64_t);
template StatusOr<std::unique_ptr<Sequential<float>>> BuildKerasModel<float>(const KerasModel&, const Shape&,
                                                                             std::int64_t, const std::string&,
                                                                             std::string_view);
template StatusOr<std::unique_ptr<Sequential<double>>> BuildKerasModel<double>(const KerasModel&, const Shape&,
                                                                               std::int64_t, const std::string&,
                                                                               std::string_view);

}  // namespace dtlab
