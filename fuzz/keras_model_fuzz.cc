// Fuzzes the Keras model reader (core/keras_model.h): any bytes give a built model
// or an InvalidArgument with a message, never a crash, a hang or an allocation
// beyond the model bounds. An accepted model must run: its forward pass on one
// example of the data's shape gives a vector of at least the data's classes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/keras_model.h"

namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "keras_model_fuzz: invariant broken: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Small images, so that an accepted model's forward pass stays cheap.
  const dtlab::Shape image{8, 8, 1};
  auto model = dtlab::LoadKerasModel<float>(text, "fuzz.json", image, 3);
  if (!model.ok()) {
    Require(model.status().code() == dtlab::Status::Code::kInvalidArgument, "errors are InvalidArgument");
    Require(!model.status().message().empty(), "an error has a message");
    return 0;
  }
  const dtlab::Sequential<float>& built = **model;
  Require(built.num_classes() >= 3, "the output holds the classes");
  Require(!built.description_json().empty(), "a file model keeps its description");
  if (built.num_parameter_values() > (1 << 20)) return 0;  // valid, but too slow to run here
  const dtlab::ParameterList<float> params = built.InitialParameters(1);
  dtlab::Shape batch = built.example_shape();
  batch.insert(batch.begin(), 1);
  dtlab::Tensor<float> x(batch);
  dtlab::Sequential<float>::Workspace workspace;
  const dtlab::Tensor<float>& logits = built.Forward(params, x, workspace);
  Require(logits.size() == built.num_classes(), "one logit per class");
  return 0;
}
