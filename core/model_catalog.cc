#include "core/model_catalog.h"

#include <nlohmann/json.hpp>

#include "core/keras_model.h"
#include "core/model.h"

namespace dtlab {
namespace {

using Json = nlohmann::json;

// The built-in models are written for Fashion-MNIST (28x28x1 images, 10 classes).
// On another data set their input, a Reshape to the image and the last Dense follow
// the data, as they did when the models were code: an input of rank 2 ([H, W], the
// multi-worker tutorial's) stays rank 2 for one-channel images.
void FitToData(Json& root, const Shape& image_shape, int num_classes) {
  Json& layers = root["config"]["layers"];
  Json* last_dense = nullptr;
  for (Json& layer : layers) {
    Json& config = layer["config"];
    const std::string keras_class = layer["class_name"].get<std::string>();
    if (keras_class == "InputLayer") {
      const bool matrix = config["batch_shape"].size() == 3 && image_shape.size() == 3 && image_shape[2] == 1;
      Json shape = Json::array({nullptr});
      for (std::size_t d = 0; d < (matrix ? 2 : image_shape.size()); ++d) shape.push_back(image_shape[d]);
      config["batch_shape"] = shape;
    } else if (keras_class == "Reshape" && config["target_shape"].size() == 3) {
      config["target_shape"] = image_shape;
    } else if (keras_class == "Dense") {
      last_dense = &config;
    }
  }
  if (last_dense != nullptr) (*last_dense)["units"] = num_classes;
}

}  // namespace

std::vector<ModelInfo> ListModels() {
  return {
      {"seed-cnn",
       "Conv2D 32 3x3 relu, MaxPool, Conv2D 64 3x3 relu, MaxPool, Flatten, Dense 64 relu, Dense 10; L2 1e-5 "
       "(the tf.distribute custom-training tutorial's model)"},
      {"mnist-cnn",
       "Reshape 28x28x1, Conv2D 32 3x3 relu, Flatten, Dense 128 relu, Dense 10; L2 1e-5 "
       "(the multi-worker tutorial's model)"},
      {"linear", "Flatten, Dense 10: softmax regression, small enough to follow by hand"},
  };
}

bool IsModelFile(std::string_view name_or_file) {
  return name_or_file.find('/') != std::string_view::npos || name_or_file.ends_with(".json");
}

template <typename T>
StatusOr<std::unique_ptr<Sequential<T>>> MakeModel(std::string_view name, const Shape& image_shape, int num_classes) {
  if (IsModelFile(name)) {
    DTLAB_ASSIGN_OR_RETURN(const KerasModel model, ReadKerasModelFile(std::string(name)));
    DTLAB_ASSIGN_OR_RETURN(auto built,
                           BuildKerasModel<T>(model, image_shape, num_classes, model.name, std::string(name)));
    built->set_description_json(model.canonical_json);
    return built;
  }
  const std::vector<ModelInfo> models = ListModels();
  const bool listed = std::any_of(models.begin(), models.end(), [&](const ModelInfo& m) { return m.name == name; });
  const EmbeddedModelFile* file = nullptr;
  for (const EmbeddedModelFile& f : EmbeddedModelFiles())
    if (f.name == name) file = &f;
  if (!listed || file == nullptr) {
    std::string names;
    for (const auto& m : models) names += (names.empty() ? "" : ", ") + m.name;
    return Status::NotFound("unknown model '" + std::string(name) + "' (available: " + names + ")");
  }
  // The embedded text is ours, but it goes through the same checks as a file's.
  Json root = Json::parse(file->json);
  FitToData(root, image_shape, num_classes);
  const std::string source = "model '" + std::string(name) + "'";
  DTLAB_ASSIGN_OR_RETURN(const KerasModel model, ParseKerasModel(root.dump(), source));
  return BuildKerasModel<T>(model, image_shape, num_classes, std::string(name), source);
}

template StatusOr<std::unique_ptr<Sequential<float>>> MakeModel<float>(std::string_view, const Shape&, int);
template StatusOr<std::unique_ptr<Sequential<double>>> MakeModel<double>(std::string_view, const Shape&, int);

}  // namespace dtlab
