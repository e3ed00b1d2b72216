// Models from files (docs/models.md): Keras model.to_json() texts are read, checked
// and built; every refusal names the layer and what is supported; the built-in
// models, now JSON descriptions, build exactly the models they were as code.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/activation_layer.h"
#include "core/conv2d.h"
#include "core/dense.h"
#include "core/dropout.h"
#include "core/keras_model.h"
#include "core/model_catalog.h"
#include "core/pooling.h"
#include "core/reshape.h"
#include "sim/training/trainer.h"
#include "tests/unit/test_util.h"

namespace dtlab {
namespace {

using Json = nlohmann::json;

std::string Fixture(const std::string& name) { return std::string(DTLAB_TEST_SOURCE_DIR) + "/tests/models/" + name; }

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The models as core/model.cc built them before they were data (commit 48b0996).
template <typename T>
std::unique_ptr<Sequential<T>> BuiltByCode(const std::string& name, const Shape& image_shape, int num_classes) {
  std::vector<std::unique_ptr<Layer<T>>> layers;
  Shape example_shape = image_shape;
  double l2 = 1e-5;
  const auto relu = Activation::kRelu, linear = Activation::kLinear;
  const L2Factors factors{l2, 0};
  typename Conv2D<T>::Options conv;
  conv.l2 = factors;
  if (name == "seed-cnn") {
    layers.push_back(std::make_unique<Conv2D<T>>("conv2d", 32, 3, 3, relu, conv));
    layers.push_back(std::make_unique<MaxPooling2D<T>>("max_pooling2d"));
    layers.push_back(std::make_unique<Conv2D<T>>("conv2d_1", 64, 3, 3, relu, conv));
    layers.push_back(std::make_unique<MaxPooling2D<T>>("max_pooling2d_1"));
    layers.push_back(std::make_unique<Reshape<T>>("flatten", Shape{}));
    layers.push_back(std::make_unique<Dense<T>>("dense", 64, relu, factors));
    layers.push_back(std::make_unique<Dense<T>>("dense_1", num_classes, linear, factors));
  } else if (name == "mnist-cnn") {
    if (image_shape.size() == 3 && image_shape[2] == 1) example_shape = {image_shape[0], image_shape[1]};
    layers.push_back(std::make_unique<Reshape<T>>("reshape", image_shape));
    layers.push_back(std::make_unique<Conv2D<T>>("conv2d", 32, 3, 3, relu, conv));
    layers.push_back(std::make_unique<Reshape<T>>("flatten", Shape{}));
    layers.push_back(std::make_unique<Dense<T>>("dense", 128, relu, factors));
    layers.push_back(std::make_unique<Dense<T>>("dense_1", num_classes, linear, factors));
  } else {
    layers.push_back(std::make_unique<Reshape<T>>("flatten", Shape{}));
    layers.push_back(std::make_unique<Dense<T>>("dense", num_classes, linear));
  }
  return std::make_unique<Sequential<T>>(name, example_shape, std::move(layers));
}

void ExpectSameModel(const Sequential<float>& got, const Sequential<float>& want) {
  EXPECT_EQ(got.name(), want.name());
  EXPECT_EQ(got.example_shape(), want.example_shape());
  EXPECT_EQ(got.num_classes(), want.num_classes());
  EXPECT_EQ(got.Summary(), want.Summary());
  EXPECT_FALSE(got.softmax_output());
  EXPECT_TRUE(got.description_json().empty());  // checkpoints of built-in models record only the name
  ASSERT_EQ(got.layers().size(), want.layers().size());
  for (std::size_t l = 0; l < got.layers().size(); ++l) {
    EXPECT_EQ(got.layers()[l]->name(), want.layers()[l]->name());
    EXPECT_EQ(got.layers()[l]->kind(), want.layers()[l]->kind());
  }
  ASSERT_EQ(got.parameters().size(), want.parameters().size());
  for (std::size_t p = 0; p < got.parameters().size(); ++p) {
    const ModelParameter &a = got.parameters()[p], &b = want.parameters()[p];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.spec.shape, b.spec.shape) << a.name;
    EXPECT_EQ(a.spec.is_kernel, b.spec.is_kernel) << a.name;
    EXPECT_EQ(a.spec.fan_in, b.spec.fan_in) << a.name;
    EXPECT_EQ(a.spec.fan_out, b.spec.fan_out) << a.name;
    EXPECT_EQ(a.spec.l2, b.spec.l2) << a.name;
    EXPECT_EQ(a.layer, b.layer) << a.name;
  }
  EXPECT_EQ(WeightsDigest(got.InitialParameters(1)), WeightsDigest(want.InitialParameters(1)));
  EXPECT_EQ(WeightsDigest(got.InitialParameters(99)), WeightsDigest(want.InitialParameters(99)));
}

TEST(KerasModel, BuiltInModelsAreTheModelsTheyWereAsCode) {
  for (const std::string name : {"seed-cnn", "mnist-cnn", "linear"})
    for (const Shape& image : {Shape{28, 28, 1}, Shape{12, 12, 1}, Shape{14, 13, 3}})
      for (const int classes : {10, 5}) {
        SCOPED_TRACE(name + " " + ShapeToString(image) + " " + std::to_string(classes));
        auto model = MakeModel<float>(name, image, classes);
        ASSERT_TRUE(model.ok()) << model.status().ToString();
        ExpectSameModel(**model, *BuiltByCode<float>(name, image, classes));
      }
}

TEST(KerasModel, BuiltInModelDigestsArePinned) {
  // Initial weights of seed-cnn on Fashion-MNIST's shape with seed 1: the same as
  // before the models were data (this digest was computed from the code at 48b0996).
  auto model = std::move(MakeModel<float>("seed-cnn", {28, 28, 1}, 10)).value();
  auto code = BuiltByCode<float>("seed-cnn", {28, 28, 1}, 10);
  EXPECT_EQ(WeightsDigest(model->InitialParameters(1)), WeightsDigest(code->InitialParameters(1)));
  EXPECT_EQ(model->num_parameter_values(), 121930);
}

TEST(KerasModel, EveryEmbeddedFileIsAListedModel) {
  const auto models = ListModels();
  EXPECT_EQ(EmbeddedModelFiles().size(), models.size());
  for (const EmbeddedModelFile& file : EmbeddedModelFiles()) {
    EXPECT_TRUE(std::any_of(models.begin(), models.end(), [&](const ModelInfo& m) { return m.name == file.name; }))
        << file.name;
    // The embedded text is the file in the source tree.
    EXPECT_EQ(file.json,
              ReadText(std::string(DTLAB_TEST_SOURCE_DIR) + "/core/models/" + std::string(file.name) + ".json"));
  }
}

TEST(KerasModel, TooSmallImagesStillSayTheModelDoesNotFit) {
  auto model = MakeModel<float>("seed-cnn", {4, 4, 1}, 10);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(model.status().message().find("model 'seed-cnn'"), std::string::npos) << model.status().message();
  EXPECT_NE(model.status().message().find("does not fit"), std::string::npos) << model.status().message();
  EXPECT_NE(model.status().message().find("conv2d_1"), std::string::npos) << model.status().message();
}

TEST(KerasModel, IsModelFile) {
  EXPECT_FALSE(IsModelFile("seed-cnn"));
  EXPECT_FALSE(IsModelFile("resnet"));
  EXPECT_TRUE(IsModelFile("model.json"));
  EXPECT_TRUE(IsModelFile("./seed-cnn"));
  EXPECT_TRUE(IsModelFile("/tmp/x"));
}

TEST(KerasModel, ReadsAKerasWrittenModelWithEveryLayer) {
  auto made = MakeModel<float>(Fixture("every_layer.json"), {28, 28, 1}, 10);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const Sequential<float>& model = **made;
  EXPECT_EQ(model.name(), "every_layer");
  EXPECT_TRUE(model.softmax_output());  // Dense(10, activation='softmax'): the loss applies it
  EXPECT_FALSE(model.description_json().empty());
  std::vector<std::string> kinds;
  for (const auto& layer : model.layers()) kinds.push_back(std::string(layer->kind()) + ":" + layer->name());
  const std::vector<std::string> want = {"Conv2D:conv2d",
                                         "MaxPooling2D:max_pooling2d",
                                         "Conv2D:conv2d_1",
                                         "Activation:activation",
                                         "AveragePooling2D:average_pooling2d",
                                         "ReLU:re_lu",
                                         "Flatten:flatten",
                                         "Dense:dense",
                                         "Activation:activation_1",
                                         "Reshape:reshape",
                                         "Softmax:softmax",
                                         "Flatten:flatten_1",
                                         "Dense:dense_1"};
  EXPECT_EQ(kinds, want);
  const auto* conv = dynamic_cast<const Conv2D<float>*>(model.layers()[0].get());
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->options().stride_height, 2);
  EXPECT_EQ(conv->options().padding, Padding::kSame);
  EXPECT_EQ(conv->activation(), Activation::kRelu);
  const auto* pool = dynamic_cast<const MaxPooling2D<float>*>(model.layers()[1].get());
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->options().pool_height, 3);
  EXPECT_EQ(pool->options().stride_width, 2);
  // Regularizers per parameter: conv2d's kernel 1e-4 and bias 1e-3, dense's kernel 2e-4.
  std::map<std::string, double> l2;
  for (const ModelParameter& p : model.parameters()) l2[p.name] = p.spec.l2;
  EXPECT_EQ(l2["conv2d/kernel"], 1e-4);
  EXPECT_EQ(l2["conv2d/bias"], 1e-3);
  EXPECT_EQ(l2["conv2d_1/kernel"], 0.0);
  EXPECT_EQ(l2["dense/kernel"], 2e-4);
  EXPECT_EQ(l2["dense_1/kernel"], 0.0);
  EXPECT_TRUE(model.regularized());
  // Shapes: 28 -> 14 (stride 2, same) -> 7 (3/2 same) -> 7 -> 6 (2/1 valid) -> 432 -> 32 -> [4, 8] -> 10.
  EXPECT_EQ(model.parameters()[0].spec.shape, (Shape{3, 3, 1, 8}));
  EXPECT_EQ(model.parameters()[2].spec.shape, (Shape{2, 3, 8, 12}));
  EXPECT_EQ(model.parameters()[4].spec.shape, (Shape{6 * 6 * 12, 32}));
  EXPECT_EQ(model.num_classes(), 10);
}

TEST(KerasModel, TheMultiWorkerTutorialsInputFitsOneChannelImages) {
  auto made = MakeModel<float>(Fixture("strided_cnn.json"), {28, 28, 1}, 10);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ((*made)->example_shape(), (Shape{28, 28}));
  // Another image size does not fit a file's fixed input.
  auto other = MakeModel<float>(Fixture("strided_cnn.json"), {20, 20, 1}, 10);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("does not hold the data set's examples [20, 20, 1]"), std::string::npos)
      << other.status().message();
}

TEST(KerasModel, CanonicalJsonIsTheSameForTheSameModel) {
  const std::string text = ReadText(Fixture("strided_cnn.json"));
  auto a = ParseKerasModel(text, "a");
  Json reformatted = Json::parse(text);
  auto b = ParseKerasModel(reformatted.dump(4), "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->canonical_json, b->canonical_json);
  // And it reads back as the same model (what dtlab eval does with a checkpoint's copy).
  auto c = ParseKerasModel(a->canonical_json, "c");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->canonical_json, a->canonical_json);
}

// A refusal: exit 2 (InvalidArgument), the message holding every piece.
void ExpectRefused(const std::string& text, const std::vector<std::string>& pieces, const Shape& image = {28, 28, 1}) {
  auto model = LoadKerasModel<float>(text, "model.json", image, 10);
  ASSERT_FALSE(model.ok()) << "accepted, expected a refusal with: " << pieces.back();
  EXPECT_EQ(model.status().code(), Status::Code::kInvalidArgument) << model.status().ToString();
  for (const std::string& piece : pieces)
    EXPECT_NE(model.status().message().find(piece), std::string::npos)
        << "'" << piece << "' not in: " << model.status().message();
}

TEST(KerasModel, RefusesKerasWrittenFilesItDoesNotSupport) {
  ExpectRefused(ReadText(Fixture("l1_regularizer.json")),
                {"layers[2] 'dense_5' (Dense)", "kernel_regularizer", "the L1 regularizer is not supported"});
  ExpectRefused(ReadText(Fixture("dilated.json")), {"layers[1] 'conv2d_5' (Conv2D)", "dilation_rate"});
  ExpectRefused(ReadText(Fixture("no_input_shape.json")), {"no input shape", "keras.Input(shape=...)"});
  ExpectRefused(ReadText(Fixture("functional.json")), {"a Functional model", "dtlab reads Sequential models"});
}

TEST(KerasModel, ReadsBatchNormalizationAsKerasWritesIt) {
  auto made = MakeModel<float>(Fixture("batch_normalization.json"), {28, 28, 1}, 10);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::vector<std::string> names;
  for (const auto& p : (*made)->parameters()) names.push_back(p.name + (p.spec.trainable ? "" : " (frozen)"));
  EXPECT_EQ(names, (std::vector<std::string>{"conv2d_4/kernel", "conv2d_4/bias", "batch_normalization/gamma",
                                             "batch_normalization/beta", "batch_normalization/moving_mean (frozen)",
                                             "batch_normalization/moving_variance (frozen)", "dense_4/kernel",
                                             "dense_4/bias"}));
  const std::string layer = "layers[2] 'batch_normalization' (BatchNormalization)";
  Json root = Json::parse(ReadText(Fixture("batch_normalization.json")));
  auto with = [&](const char* key, Json value) {
    Json edited = root;
    edited["config"]["layers"][2]["config"][key] = value;
    return edited.dump();
  };
  ExpectRefused(with("axis", 1), {layer, "axis", "-1"});
  ExpectRefused(with("renorm", true), {layer, "renorm"});
  ExpectRefused(with("center", "yes"), {layer, "center must be true or false"});
  ExpectRefused(with("trainable", false), {layer, "frozen"});
  ExpectRefused(with("momentum", 2), {layer, "momentum"});
  ExpectRefused(with("gamma_regularizer", Json::parse(R"({"class_name": "L2", "config": {"l2": 0.1}})")),
                {layer, "gamma_regularizer"});
  ExpectRefused(with("virtual_batch_size", 4), {layer, "virtual_batch_size"});
  ExpectRefused(with("moving_variance_initializer", "zeros"), {layer, "moving_variance_initializer"});
}

// every_layer.json with one change: `edit` gets the layer list.
std::string Edited(const std::function<void(Json& layers)>& edit) {
  Json root = Json::parse(ReadText(Fixture("every_layer.json")));
  edit(root["config"]["layers"]);
  return root.dump();
}

TEST(KerasModel, RefusesEveryUnsupportedOption) {
  auto conv = [](const char* key, Json value) {
    return Edited([&](Json& layers) { layers[1]["config"][key] = value; });
  };
  const std::string conv2d = "layers[1] 'conv2d' (Conv2D)";
  ExpectRefused(conv("data_format", "channels_first"), {conv2d, "data_format", "channels_first"});
  ExpectRefused(conv("groups", 2), {conv2d, "groups must be 1"});
  ExpectRefused(conv("dilation_rate", Json::array({2, 1})), {conv2d, "dilation_rate"});
  ExpectRefused(conv("padding", "causal"), {conv2d, "padding \"causal\" is not supported (supported: valid, same)"});
  ExpectRefused(conv("activation", "tanh"), {conv2d, "activation \"tanh\"", "linear, relu, softmax"});
  ExpectRefused(conv("use_bias", false), {conv2d, "use_bias must be true"});
  ExpectRefused(conv("trainable", false), {conv2d, "trainable must be true"});
  ExpectRefused(conv("kernel_initializer", Json{{"class_name", "HeNormal"}, {"config", Json::object()}}),
                {conv2d, "kernel_initializer must be GlorotUniform"});
  ExpectRefused(conv("bias_initializer", Json{{"class_name", "Ones"}, {"config", Json::object()}}),
                {conv2d, "bias_initializer must be Zeros"});
  ExpectRefused(conv("kernel_constraint", Json{{"class_name", "MaxNorm"}}), {conv2d, "kernel_constraint"});
  ExpectRefused(conv("activity_regularizer", Json{{"class_name", "L2"}}), {conv2d, "activity_regularizer"});
  ExpectRefused(conv("kernel_regularizer", Json{{"class_name", "L1L2"}, {"config", {{"l1", 0.1}, {"l2", 0.1}}}}),
                {conv2d, "an L1 term is not supported"});
  ExpectRefused(conv("kernel_regularizer", Json{{"class_name", "L2"}, {"config", {{"l2", -1}}}}),
                {conv2d, "l2 must be a number in [0, 1e6]"});
  ExpectRefused(conv("filters", Json(0)), {conv2d, "filters must be an integer in [1, 16777216], got 0"});
  ExpectRefused(conv("filters", 1e30), {conv2d, "filters must be an integer"});
  ExpectRefused(conv("filters", "8"), {conv2d, "filters must be an integer"});
  ExpectRefused(conv("filters", Json(18446744073709551615ull)), {conv2d, "filters must be an integer"});
  ExpectRefused(conv("kernel_size", Json::array({3, 3, 3})), {conv2d, "kernel_size must be"});
  ExpectRefused(conv("strides", Json::array({0, 1})), {conv2d, "strides must be"});
  ExpectRefused(conv("lora_rank", 4), {conv2d, "option 'lora_rank' is not supported"});
  ExpectRefused(conv("dtype", "float16"), {conv2d, "dtype must be float32"});
  // A key Keras may add, left at null, is fine.
  EXPECT_TRUE(LoadKerasModel<float>(conv("lora_rank", nullptr), "m", {28, 28, 1}, 10).ok());

  auto layer = [](std::size_t index, const char* key, Json value) {
    return Edited([&](Json& layers) { layers[index]["config"][key] = value; });
  };
  ExpectRefused(layer(2, "pool_size", Json::array({0, 2})), {"layers[2] 'max_pooling2d' (MaxPooling2D)", "pool_size"});
  ExpectRefused(layer(6, "max_value", 6.0), {"layers[6] 're_lu' (ReLU)", "max_value must be null"});
  ExpectRefused(layer(6, "negative_slope", 0.1), {"layers[6] 're_lu' (ReLU)", "negative_slope"});
  ExpectRefused(layer(11, "axis", 1), {"layers[11] 'softmax' (Softmax)", "axis must be -1"});
  ExpectRefused(layer(10, "target_shape", Json::array({-1, -1})), {"layers[10] 'reshape' (Reshape)", "one -1"});
  ExpectRefused(layer(10, "target_shape", Json::array({5, 7})),
                {"layers[10] 'reshape' (Reshape) does not fit its input of shape [32]"});
  ExpectRefused(layer(10, "target_shape", Json::array({1, 1, 1, 32})), {"layers[10] 'reshape'", "target_shape"});
  ExpectRefused(layer(8, "units", 1 << 25), {"layers[8] 'dense' (Dense)", "units must be"});
  ExpectRefused(layer(3, "name", "conv2d"), {"layers[3] 'conv2d' (Conv2D)", "names must be unique"});
  ExpectRefused(layer(3, "name", "../../etc/passwd"), {"layers[3] (Conv2D)", "is not a name"});
  ExpectRefused(layer(3, "name", "a/b"), {"layers[3] (Conv2D)", "is not a name"});
  ExpectRefused(Edited([](Json& layers) { layers[3]["class_name"] = "LSTM"; }),
                {"layers[3] 'conv2d_1' (LSTM): this layer class is not supported"});
  ExpectRefused(Edited([](Json& layers) { layers[3]["module"] = "my_layers"; }),
                {"layers[3] 'conv2d_1' (Conv2D)", "registered outside Keras"});
  ExpectRefused(Edited([](Json& layers) { layers[3]["registered_name"] = "Custom>Conv2D"; }),
                {"layers[3] 'conv2d_1' (Conv2D)", "registered outside Keras"});
  ExpectRefused(Edited([](Json& layers) { std::swap(layers[0], layers[1]); }), {"an InputLayer must come first"});
  ExpectRefused(Edited([](Json& layers) {
                  layers[0]["config"]["batch_shape"] = Json::array({nullptr, 0, 28, 1});
                }),
                {"batch_shape must be [null, d1, ...]"});
  ExpectRefused(Edited([](Json& layers) {
                  layers[0]["config"]["batch_shape"] = Json::array({nullptr, 28, 28, 1, 1});
                }),
                {"batch_shape must be [null, d1, ...]"});
  ExpectRefused(Edited([](Json& layers) { layers[0]["config"]["sparse"] = true; }), {"sparse inputs"});
}

TEST(KerasModel, ReadsDropout) {
  const std::string text = ReadText(Fixture("dropout_cnn.json"));
  auto made = LoadKerasModel<float>(text, "m", {28, 28, 1}, 10);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const auto* dropout = dynamic_cast<const Dropout<float>*>((*made)->layers()[2].get());
  ASSERT_NE(dropout, nullptr);
  EXPECT_EQ(dropout->rate(), 0.25);
  auto edit = [&](const char* key, Json value) {
    Json root = Json::parse(text);
    root["config"]["layers"][3]["config"][key] = value;
    return root.dump();
  };
  ExpectRefused(edit("rate", 1.5), {"layers[3] 'dropout' (Dropout)", "rate must be a number in [0, 1]"});
  ExpectRefused(edit("rate", nullptr), {"layers[3] 'dropout' (Dropout)", "rate must be", "missing"});
  ExpectRefused(edit("noise_shape", Json::array({nullptr, 1, 1, 16})), {"layers[3] 'dropout'", "noise_shape"});
  EXPECT_TRUE(LoadKerasModel<float>(edit("seed", 1234), "m", {28, 28, 1}, 10).ok());
}

TEST(KerasModel, RefusesWhatIsNotASequentialKerasModel) {
  ExpectRefused("", {"model.json: not JSON"});
  ExpectRefused("{\"class_name\": \"Sequential\"", {"model.json: not JSON"});
  ExpectRefused("[1, 2]", {"not a Keras model"});
  ExpectRefused(std::string(100000, '['), {"nests deeper than 12 levels"});
  ExpectRefused("{\"class_name\": \"Sequential\", \"config\": {\"layers\": []}}", {"no layers"});
  ExpectRefused("{\"class_name\": \"Sequential\", \"config\": {\"name\": \"x y\", \"layers\": [1]}}", {"not a name"});
  ExpectRefused("{\"class_name\": \"Sequential\", \"config\": {\"layers\": [1]}}", {"layers[0] is not a Keras layer"});
  Json many = Json::parse(ReadText(Fixture("strided_cnn.json")));
  Json& layers = many["config"]["layers"];
  for (int i = 0; i < 300; ++i) {
    std::string name = "r";  // appended: GCC 12 warns about "r" + std::string&& (-Wrestrict, a false positive)
    name += std::to_string(i);
    Json relu = {{"class_name", "ReLU"}, {"config", {{"name", name}}}};
    layers.insert(layers.end() - 1, relu);
  }
  ExpectRefused(many.dump(), {"the model has 309 layers; dtlab reads at most 256"});
  ExpectRefused(Edited([](Json& layers) {
                  layers.erase(layers.begin() + 9, layers.end());
                  layers[8]["config"]["units"] = 7;
                }),
                {"the model's output is [7] per example", "at least 10 logits"});
  ExpectRefused(Edited([](Json& layers) { layers.erase(layers.end() - 3, layers.end()); }),
                {"the model's output is [4, 8] per example"});
  // The root model's dtype policy.
  Json mixed = Json::parse(ReadText(Fixture("strided_cnn.json")));
  mixed["config"]["dtype"]["config"]["name"] = "mixed_float16";
  ExpectRefused(mixed.dump(), {"dtype must be float32"});
}

TEST(KerasModel, RefusesModelsTooLargeForMemoryBeforeAllocating) {
  // Values per example beyond 2^26: a wide convolution on a large input.
  ExpectRefused(Edited([](Json& layers) {
                  layers[0]["config"]["batch_shape"] = Json::array({nullptr, 4096, 4096, 1});
                  layers[1]["config"]["filters"] = 4096;
                }),
                {"layers[1] 'conv2d' (Conv2D): its output [2048, 2048, 4096]", "values per example"}, {4096, 4096, 1});
  // Parameters beyond 2^28: a Dense of 2^24 units after 432 inputs.
  ExpectRefused(Edited([](Json& layers) { layers[8]["config"]["units"] = 1 << 24; }),
                {"layers[8] 'dense' (Dense): its kernel [432, 16777216]", "parameters"});
  // A kernel far larger than its input with same padding: the patch matrix is bounded too.
  ExpectRefused(Edited([](Json& layers) {
                  layers[0]["config"]["batch_shape"] = Json::array({nullptr, 1024, 1024, 1});
                  layers[1]["config"]["kernel_size"] = Json::array({4096, 4096});
                  layers[1]["config"]["strides"] = 1;
                  layers[1]["config"]["filters"] = 1;
                }),
                {"layers[1] 'conv2d' (Conv2D)", "with its patch matrix"}, {1024, 1024, 1});
}

TEST(KerasModel, ReadsOnlyRegularFilesOfBoundedSize) {
  const std::filesystem::path dir = testing::FreshTestDirectory();
  auto refused = MakeModel<float>(dir.string() + "/", {28, 28, 1}, 10);
  ASSERT_FALSE(refused.ok());
  auto missing = MakeModel<float>((dir / "missing.json").string(), {28, 28, 1}, 10);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing.json"), std::string::npos);
  const std::filesystem::path big = dir / "big.json";
  std::ofstream(big) << std::string(kMaxModelFileBytes + 1, ' ');
  auto too_big = MakeModel<float>(big.string(), {28, 28, 1}, 10);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), Status::Code::kInvalidArgument) << too_big.status().ToString();
}

}  // namespace
}  // namespace dtlab
